#include "sharding/weight_decay_policy.h"

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(WeightDecayPolicyTest, WithoutPatternsTheModelsMarksDecide) {
  WeightDecayPolicy policy;
  EXPECT_TRUE(policy.Decays("blocks.0.fc.weight", /*model_no_decay=*/false));
  EXPECT_FALSE(policy.Decays("blocks.0.fc.bias", /*model_no_decay=*/true));
  // No name rule of its own: an unmarked bias decays.
  EXPECT_TRUE(policy.Decays("blocks.0.fc.bias"));
}

TEST(WeightDecayPolicyTest, SuffixAndSeparatorPatterns) {
  WeightDecayPolicy policy({".bias", "ln_"});
  EXPECT_TRUE(policy.Decays("h.0.attn.c_attn.weight"));
  EXPECT_FALSE(policy.Decays("h.0.attn.c_attn.bias"));
  EXPECT_FALSE(policy.Decays("h.0.ln_1.weight"));
  EXPECT_FALSE(policy.Decays("ln_f.bias"));
  // "bias" inside a name is not a suffix match.
  EXPECT_TRUE(policy.Decays("h.0.biased.weight"));
}

TEST(WeightDecayPolicyTest, CustomPatternsReplaceTheModelsMarks) {
  WeightDecayPolicy policy({"wpe.weight", "attn."});
  EXPECT_FALSE(policy.Decays("wpe.weight"));
  EXPECT_FALSE(policy.Decays("h.1.attn.c_proj.weight"));          // contains "attn."
  EXPECT_TRUE(policy.Decays("h.0.ln_1.weight", /*model_no_decay=*/true));  // marks gone
  EXPECT_TRUE(policy.Decays("h.0.mlp.c_fc.bias"));
}

}  // namespace
}  // namespace zeroshard
