#include "sharding/weight_decay_policy.h"

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(WeightDecayPolicyTest, DefaultsExcludeBiasesAndLayerNorm) {
  WeightDecayPolicy policy;
  EXPECT_TRUE(policy.Decays("wte.weight"));
  EXPECT_TRUE(policy.Decays("wpe.weight"));
  EXPECT_TRUE(policy.Decays("h.0.attn.c_attn.weight"));
  EXPECT_TRUE(policy.Decays("h.11.mlp.c_proj.weight"));
  EXPECT_FALSE(policy.Decays("h.0.attn.c_attn.bias"));
  EXPECT_FALSE(policy.Decays("h.0.ln_1.weight"));
  EXPECT_FALSE(policy.Decays("h.3.ln_2.bias"));
  EXPECT_FALSE(policy.Decays("ln_f.weight"));
  // "bias" inside a name is not a suffix match.
  EXPECT_TRUE(policy.Decays("h.0.biased.weight"));
}

TEST(WeightDecayPolicyTest, CustomPatternsReplaceDefaults) {
  WeightDecayPolicy policy({"wpe.weight", "attn."});
  EXPECT_FALSE(policy.Decays("wpe.weight"));
  EXPECT_FALSE(policy.Decays("h.1.attn.c_proj.weight"));  // contains "attn."
  EXPECT_TRUE(policy.Decays("h.0.ln_1.weight"));          // defaults gone
  EXPECT_TRUE(policy.Decays("h.0.mlp.c_fc.bias"));
}

}  // namespace
}  // namespace zeroshard
