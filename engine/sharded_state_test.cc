// ShardedState: regions by unit, the initial weights whatever the layout,
// the counters.
#include "engine/sharded_state.h"

#include <cstring>
#include <memory>
#include <vector>

#include "engine/testing/engine_parts.h"
#include "engine/testing/toy_model.h"
#include "gtest/gtest.h"
#include "sharding/testing/thread_communicator.h"

namespace zeroshard {
namespace {

const ToyModelConfig kToy{2, 16, 67, 8};

std::unique_ptr<EngineParts> Parts(int stage, Communicator* comm) {
  absl::StatusOr<std::unique_ptr<EngineParts>> parts =
      MakeEngineParts(ToyEngineConfig(stage, 1), BuildToyModel(kToy), comm);
  EXPECT_TRUE(parts.ok()) << parts.status();
  return parts.ok() ? std::move(*parts) : nullptr;
}

// The whole master of every unit, on the host.
std::vector<std::vector<float>> Masters(const ShardedState& state) {
  std::vector<std::vector<float>> out;
  for (int u = 0; u < state.num_units(); ++u) {
    const UnitShard& shard = *state.unit_shard(u);
    std::vector<float> m(static_cast<size_t>(shard.master_numel()));
    std::memcpy(m.data(), const_cast<UnitShard&>(shard).master(), m.size() * sizeof(float));
    out.push_back(std::move(m));
  }
  return out;
}

TEST(ShardedStateTest, EveryTrainableUnitHasARegionInUnitOrder) {
  auto comms = CreateThreadGroup(1);
  std::unique_ptr<EngineParts> parts = Parts(/*stage=*/0, comms[0].get());
  ASSERT_NE(parts, nullptr);
  const ShardedState& state = *parts->state;
  ASSERT_EQ(state.num_units(), 4);  // embed, blk.0, blk.1, head
  for (int u = 0; u < state.num_units(); ++u) {
    ASSERT_NE(state.unit_shard(u), nullptr) << u;
    EXPECT_EQ(state.optimizer_region(u), u);
    EXPECT_EQ(&state.layout(u), &parts->resources.plan.layouts[u]);
  }
  EXPECT_EQ(state.device(), Device::kCpu);
}

TEST(ShardedStateTest, InitialMastersAreTheSameForEveryStageAndRepeat) {
  auto comms = CreateThreadGroup(1);
  std::unique_ptr<EngineParts> s0 = Parts(/*stage=*/0, comms[0].get());
  std::unique_ptr<EngineParts> again = Parts(/*stage=*/0, comms[0].get());
  std::unique_ptr<EngineParts> s3 = Parts(/*stage=*/3, comms[0].get());
  ASSERT_NE(s0, nullptr);
  ASSERT_NE(again, nullptr);
  ASSERT_NE(s3, nullptr);
  const std::vector<std::vector<float>> m0 = Masters(*s0->state);
  EXPECT_EQ(m0, Masters(*again->state));
  EXPECT_EQ(m0, Masters(*s3->state));  // one rank: its shard is the whole padded buffer
  bool any_nonzero = false;
  for (const std::vector<float>& m : m0) {
    for (float x : m) any_nonzero |= x != 0.0f;
  }
  EXPECT_TRUE(any_nonzero);
}

TEST(ShardedStateTest, CountersAndRestoredProgress) {
  auto comms = CreateThreadGroup(1);
  std::unique_ptr<EngineParts> parts = Parts(/*stage=*/2, comms[0].get());
  ASSERT_NE(parts, nullptr);
  ShardedState& state = *parts->state;
  EXPECT_EQ(state.step(), 0);
  EXPECT_EQ(state.attempts(), 0);
  state.CountStep();
  state.CountAttempt();
  state.CountSkippedStep();
  state.CountAttempt();
  EXPECT_EQ(state.step(), 1);
  EXPECT_EQ(state.skipped_steps(), 1);
  EXPECT_EQ(state.attempts(), 2);
  state.RestoreProgress(/*step=*/5, /*skipped_steps=*/2);
  EXPECT_EQ(state.step(), 5);
  EXPECT_EQ(state.skipped_steps(), 2);
  EXPECT_EQ(state.attempts(), 7);
}

}  // namespace
}  // namespace zeroshard
