#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_model_config.h"

namespace zeroshard {
namespace {

TEST(Gpt2ParamsTest, BiasesAndLayerNormAreMarkedNoWeightDecay) {
  Gpt2Config c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  c.vocab_size = 16;
  c.seq_len = 4;
  absl::StatusOr<std::unique_ptr<Model>> model = BuildGpt2(c);
  ASSERT_TRUE(model.ok()) << model.status();
  int marked = 0;
  for (const auto& unit : (*model)->units) {
    for (const ParamSpec& p : unit->params()) {
      // The rule the engine applied by name before models marked their own.
      const bool expected = absl::EndsWith(p.name, ".bias") || absl::StrContains(p.name, "ln_");
      EXPECT_EQ(p.no_weight_decay, expected) << p.name;
      EXPECT_FALSE(p.weight_decay_mult.has_value()) << p.name;
      marked += p.no_weight_decay ? 1 : 0;
    }
  }
  EXPECT_EQ(marked, 2 * 8 + 2);  // per block: 2 LayerNorms x 2, 4 biases; ln_f x 2
}

TEST(Gpt2ParamsTest, ParamCountMatchesThePublishedModel) {
  ModelConfig m;
  m.set_n_layer(12);
  m.set_n_head(12);
  m.set_n_embd(768);
  m.set_vocab_size(50257);
  m.set_seq_len(1024);
  EXPECT_EQ(Gpt2ParamCount(m), 124439808);  // GPT-2 small, tied head.
}

}  // namespace
}  // namespace zeroshard
