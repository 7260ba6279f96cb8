// OptimizerPhase over one rank's sharded state: a finite step updates and
// counts, a non-finite gradient skips with the masters bitwise unchanged,
// the gradient events, and an action of another kind.
#include "engine/optimizer_phase.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "engine/testing/engine_parts.h"
#include "engine/testing/toy_model.h"
#include "gtest/gtest.h"
#include "sharding/testing/thread_communicator.h"

namespace zeroshard {
namespace {

const ToyModelConfig kToy{2, 16, 67, 8};

class CountingObserver : public EngineObserver {
 public:
  void OnReducedGradient(const GradientEvent& g) override { ++reduced; }
  void OnFinalGradient(const GradientEvent& g) override { ++final_grads; }
  int reduced = 0;
  int final_grads = 0;
};

class OptimizerPhaseTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    comms_ = CreateThreadGroup(1);
    absl::StatusOr<std::unique_ptr<EngineParts>> parts =
        MakeEngineParts(ToyEngineConfig(GetParam(), 1), BuildToyModel(kToy), comms_[0].get());
    ASSERT_TRUE(parts.ok()) << parts.status();
    parts_ = std::move(*parts);
    parts_->resources.observers.push_back(&observer_);
    // As BEGIN_STEP leaves them: gradients allocated and zero.
    for (const auto& shard : parts_->state->shards()) {
      if (parts_->resources.options.zero.grad_shard_per_step()) {
        ASSERT_TRUE(shard->EnsureGradShard().ok());
      }
      ASSERT_TRUE(
          (parts_->resources.options.zero.zeroes_full_grads() ? shard->ZeroFullGrads() : shard->ZeroGradShard()).ok());
    }
  }

  // The train program's optimizer-phase actions, in order, with one
  // micro-batch's loss sum 3 over weight 2 (and the nominal weight 2).
  absl::Status RunPhase(StepResult* result) {
    OptimizerPhase phase(&parts_->resources, parts_->state.get());
    OptimizerPhaseState state;
    LossTerms terms;
    terms.loss = {3.0, 2.0};
    terms.metrics.resize(parts_->resources.plan.metric_names.size());
    const std::vector<LossTerms> losses = {terms};
    for (const Action& a : parts_->resources.plan.train.actions) {
      switch (a.kind) {
        case ActionKind::kTiedReduce:
        case ActionKind::kNormPartial:
        case ActionKind::kReduceNorm:
        case ActionKind::kUpdate:
        case ActionKind::kPublish:
        case ActionKind::kScalerUpdate: {
          absl::Status s = phase.Run(a, losses, /*nominal_weight=*/2.0, result, &state);
          if (!s.ok()) return s;
          break;
        }
        default:
          break;
      }
    }
    return absl::OkStatus();
  }

  std::vector<float> Master(int unit) {
    UnitShard& shard = *parts_->state->unit_shard(unit);
    std::vector<float> m(static_cast<size_t>(shard.master_numel()));
    std::memcpy(m.data(), shard.master(), m.size() * sizeof(float));
    return m;
  }

  std::vector<std::unique_ptr<Communicator>> comms_;
  std::unique_ptr<EngineParts> parts_;
  CountingObserver observer_;
};

TEST_P(OptimizerPhaseTest, FiniteStepUpdatesAndCounts) {
  const std::vector<float> before = Master(1);
  StepResult result;
  ASSERT_TRUE(RunPhase(&result).ok());
  const ShardedState& state = *parts_->state;
  EXPECT_FALSE(result.skipped);
  EXPECT_FALSE(result.overflow);
  EXPECT_EQ(result.loss, 1.5f);
  EXPECT_EQ(result.loss_weight, 2.0f);
  EXPECT_EQ(result.grad_norm, 0.0f);
  EXPECT_EQ(result.lr, static_cast<float>(state.schedule().LearningRate(1)));
  EXPECT_EQ(result.step, 1);
  EXPECT_EQ(state.step(), 1);
  EXPECT_EQ(state.skipped_steps(), 0);
  EXPECT_EQ(state.attempts(), 1);
  EXPECT_NE(Master(1), before);  // decoupled weight decay moves the weights
  EXPECT_EQ(observer_.reduced, state.num_units());
  EXPECT_EQ(observer_.final_grads, state.num_units());
}

TEST_P(OptimizerPhaseTest, NonFiniteGradientSkipsTheStep) {
  parts_->state->unit_shard(1)->grad_shard()[0] = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::vector<float>> before;
  for (int u = 0; u < parts_->state->num_units(); ++u) before.push_back(Master(u));
  StepResult result;
  ASSERT_TRUE(RunPhase(&result).ok());
  const ShardedState& state = *parts_->state;
  EXPECT_TRUE(result.overflow);
  EXPECT_TRUE(result.skipped);
  EXPECT_EQ(state.step(), 0);
  EXPECT_EQ(state.skipped_steps(), 1);
  EXPECT_EQ(state.attempts(), 1);
  for (int u = 0; u < state.num_units(); ++u) EXPECT_EQ(Master(u), before[u]) << u;
  EXPECT_EQ(observer_.final_grads, 0);
}

TEST_P(OptimizerPhaseTest, OtherActionsAreRefused) {
  OptimizerPhase phase(&parts_->resources, parts_->state.get());
  OptimizerPhaseState state;
  StepResult result;
  Action forward;
  forward.kind = ActionKind::kForward;
  const absl::Status s = phase.Run(forward, {}, 1.0, &result, &state);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(s.message(), "is not an optimizer-phase action")) << s;
}

INSTANTIATE_TEST_SUITE_P(Stages, OptimizerPhaseTest, ::testing::Values(0, 2, 3));

}  // namespace
}  // namespace zeroshard
