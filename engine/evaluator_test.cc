// Evaluator over one rank's components: Evaluate repeats bitwise and does
// not train; a malformed batch is refused and leaves the engine usable;
// GatherParam returns the master weights and names a missing parameter.
#include "engine/evaluator.h"

#include <cstring>
#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "engine/testing/engine_parts.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/toy_model.h"
#include "gtest/gtest.h"
#include "sharding/testing/thread_communicator.h"

namespace zeroshard {
namespace {

const ToyModelConfig kToy{2, 16, 67, 8};

class EvaluatorTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<EngineParts>> parts =
        MakeEngineParts(ToyEngineConfig(GetParam(), 1), BuildToyModel(kToy), comms_[0].get());
    ASSERT_TRUE(parts.ok()) << parts.status();
    parts_ = std::move(*parts);
    EngineResources& r = parts_->resources;
    transport_ = std::make_unique<PipelineTransport>(nullptr, &r.tracker, Device::kCpu, &r.compute, nullptr,
                                                     r.num_units(), r.options.accumulation_steps);
    optimizer_ = std::make_unique<OptimizerPhase>(&r, parts_->state.get());
    executor_ = std::make_unique<StepExecutor>(&r, parts_->state.get(), transport_.get(), optimizer_.get());
    evaluator_ = std::make_unique<Evaluator>(&r, parts_->state.get(), executor_.get());
  }

  std::vector<std::unique_ptr<Communicator>> comms_ = CreateThreadGroup(1);
  std::unique_ptr<EngineParts> parts_;
  std::unique_ptr<PipelineTransport> transport_;
  std::unique_ptr<OptimizerPhase> optimizer_;
  std::unique_ptr<StepExecutor> executor_;
  std::unique_ptr<Evaluator> evaluator_;
  std::vector<HostBatch> host_ =
      MicroBatchesForRank(RandomTokens(3, 2, kToy.seq_len, kToy.vocab_size), 2, kToy.seq_len, 1, 1, 0);
};

TEST_P(EvaluatorTest, EvaluateRepeatsAndDoesNotTrain) {
  absl::StatusOr<EvalResult> a = evaluator_->Evaluate(host_[0].view);
  absl::StatusOr<EvalResult> b = evaluator_->Evaluate(host_[0].view);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(std::isfinite(a->loss));
  EXPECT_GT(a->loss_weight, 0.0f);
  EXPECT_EQ(a->loss, b->loss);
  EXPECT_EQ(parts_->state->attempts(), 0);
  EXPECT_EQ(parts_->state->step(), 0);
}

TEST_P(EvaluatorTest, AMalformedBatchIsRefusedAndTheEngineStaysUsable) {
  const absl::StatusOr<EvalResult> empty = evaluator_->Evaluate(Batch());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(parts_->resources.broken.ok());
  EXPECT_TRUE(evaluator_->Evaluate(host_[0].view).ok());
}

TEST_P(EvaluatorTest, GatherParamReturnsTheMasterWeights) {
  const ShardedState& state = *parts_->state;
  absl::StatusOr<std::vector<float>> wte = evaluator_->GatherParam("wte.weight");
  ASSERT_TRUE(wte.ok()) << wte.status();
  ASSERT_EQ(wte->size(), static_cast<size_t>(kToy.vocab_size * kToy.n_embd));
  const FlatParamInfo& info = state.layout(0).params()[state.layout(0).FindParam("wte.weight").value()];
  std::vector<float> master(wte->size());
  // One rank: the master (whole or its one shard) covers the padded buffer.
  std::memcpy(master.data(), const_cast<UnitShard*>(state.unit_shard(0))->master() + info.offset,
              master.size() * sizeof(float));
  EXPECT_EQ(*wte, master);
  const absl::StatusOr<std::vector<float>> missing = evaluator_->GatherParam("no.such.weight");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "no parameter named 'no.such.weight'"));
}

INSTANTIATE_TEST_SUITE_P(Stages, EvaluatorTest, ::testing::Values(0, 3));

}  // namespace
}  // namespace zeroshard
