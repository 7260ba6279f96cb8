#include "sharding/zero_policy.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(ZeroPolicyTest, RejectsStagesOutsideZeroToThree) {
  for (int stage : {-1, 4}) {
    absl::StatusOr<ZeroPolicy> p = ZeroPolicy::ForStage(stage);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(p.status().message(), absl::StrCat("ZeRO stage is ", stage, ", expected 0, 1, 2 or 3"));
  }
}

// The table of docs/sharding.md, one row per stage.
TEST(ZeroPolicyTest, AnswersFollowTheStageTable) {
  struct Row {
    int stage;
    bool shards_params, shards_master, shards_grads, publishes_by_all_gather, all_gathers_reduced_grads;
  };
  for (const Row& r : {Row{0, false, false, false, false, true}, Row{1, false, true, false, true, false},
                       Row{2, false, true, true, true, false}, Row{3, true, true, true, false, false}}) {
    const ZeroPolicy p = *ZeroPolicy::ForStage(r.stage);
    SCOPED_TRACE(r.stage);
    EXPECT_EQ(p.stage(), r.stage);
    EXPECT_EQ(p.shards_params(), r.shards_params);
    EXPECT_EQ(p.gathers_params(), r.shards_params);
    EXPECT_EQ(p.shards_master(), r.shards_master);
    EXPECT_EQ(p.shards_grads(), r.shards_grads);
    EXPECT_EQ(p.grad_shard_per_step(), !r.shards_grads);
    EXPECT_EQ(p.zeroes_full_grads(), !r.shards_grads);
    EXPECT_EQ(p.publishes_by_all_gather(), r.publishes_by_all_gather);
    EXPECT_EQ(p.all_gathers_reduced_grads(), r.all_gathers_reduced_grads);
    EXPECT_EQ(p.needs_full_f32_grads(/*low_precision_compute=*/true), r.stage == 0);
    EXPECT_FALSE(p.needs_full_f32_grads(/*low_precision_compute=*/false));
    EXPECT_EQ(p.reduces_after_backward(/*pipelined=*/false), r.stage == 1);
    EXPECT_FALSE(p.reduces_after_backward(/*pipelined=*/true));
  }
  EXPECT_EQ(ZeroPolicy(), *ZeroPolicy::ForStage(0));
}

}  // namespace
}  // namespace zeroshard
