#include "cli/check_config.h"

#include "engine/config_loader.h"
#include "gtest/gtest.h"

namespace zeroshard::cli {
namespace {

TEST(CheckConfigTest, Gpt2ParamCountMatchesThePublishedModel) {
  ModelConfig m;
  m.set_n_layer(12);
  m.set_n_head(12);
  m.set_n_embd(768);
  m.set_vocab_size(50257);
  m.set_seq_len(1024);
  EXPECT_EQ(Gpt2ParamCount(m), 124439808);  // GPT-2 small, tied head.
}

TEST(CheckConfigTest, SummaryStatesTheBatchSplit) {
  absl::StatusOr<TrainConfig> c = ParseTrainConfig(
      R"pb(model { n_layer: 1 n_head: 1 n_embd: 4 vocab_size: 8 seq_len: 2 }
           data { train_path: "t.bin" batch_size: 8 }
           engine { parallel { dp: 2 } gradient_accumulation_steps: 2 zero { stage: 2 } })pb",
      "inline");
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string s = ConfigSummary(*c, 2);
  EXPECT_NE(s.find("valid config for 2 ranks\n"), std::string::npos) << s;
  EXPECT_NE(s.find("batch      8 sequences/step = dp 2 x accumulation 2 x micro-batch 2; 16 tokens/step\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("zero       stage 2, prefetch 1"), std::string::npos) << s;
  EXPECT_NE(s.find("model      GPT-2 n_layer=1 n_head=1 n_embd=4 vocab_size=8 seq_len=2: 292 parameters\n"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace zeroshard::cli
