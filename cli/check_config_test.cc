#include "cli/check_config.h"

#include <cstdlib>
#include <fstream>

#include "cli/run_config.h"
#include "gtest/gtest.h"
#include "kernels/context.h"

namespace zeroshard::cli {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(CheckConfigTest, SummaryStatesTheBatchSplit) {
  absl::StatusOr<RunConfig> c = LoadRunConfig(
      WriteTemp("gpt2.pbtxt", R"pb(model { n_layer: 1 n_head: 1 n_embd: 4 vocab_size: 8 seq_len: 2 }
                                   data { train_path: "t.bin" batch_size: 8 }
                                   engine { parallel { dp: 2 } gradient_accumulation_steps: 2 zero { stage: 2 } })pb"),
      {}, 2);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string s = ConfigSummary(*c, 2);
  EXPECT_NE(s.find("valid config for 2 ranks\n"), std::string::npos) << s;
  EXPECT_NE(s.find("kind       gpt2 (zeroshard.TrainConfig)\n"), std::string::npos) << s;
  const kernels::CpuBlasInfo blas = kernels::DescribeCpuBlas();
  EXPECT_NE(s.find("cpu        " + blas.library + ", " + blas.core + " kernels, "), std::string::npos) << s;
  EXPECT_NE(s.find("batch      8 sequences/step = dp 2 x accumulation 2 x micro-batch 2; 16 tokens/step\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("zero       stage 2, prefetch 1"), std::string::npos) << s;
  EXPECT_NE(s.find("model      GPT-2 n_layer=1 n_head=1 n_embd=4 vocab_size=8 seq_len=2: 292 parameters\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("training   100 steps, eval every 0, train data t.bin\n"), std::string::npos) << s;
}

TEST(CheckConfigTest, SummaryOfAClassifierConfig) {
  constexpr char kText[] = R"pb(# proto-message: zeroshard.ClassifierTrainConfig
    model { input_dim: 4 projection_dim: 8 hidden: 6 num_classes: 3 }
    data { batch_size: 12 train_examples: 100 eval_examples: 30 seed: 5 }
    steps: 7
    engine { parallel { dp: 3 } gradient_accumulation_steps: 2 zero { stage: 3 } })pb";
  absl::StatusOr<RunConfig> c = LoadRunConfig(WriteTemp("classifier.pbtxt", kText), {}, 3);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string s = ConfigSummary(*c, 3);
  EXPECT_NE(s.find("kind       classifier (zeroshard.ClassifierTrainConfig)\n"), std::string::npos) << s;
  // 4*8 frozen; 8*6 + 6 and 6*3 + 3 trainable.
  EXPECT_NE(s.find("model      classifier input_dim=4 projection_dim=8 (frozen) hidden=[6] num_classes=3: 107 "
                   "parameters, 75 trainable\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("batch      12 examples/step = dp 3 x accumulation 2 x micro-batch 2\n"), std::string::npos) << s;
  EXPECT_NE(s.find("training   7 steps, 100 generated training examples (seed 5, 0 unlabeled), 30 held out\n"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace zeroshard::cli
