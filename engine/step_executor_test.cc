// StepExecutor over one rank's components: the train program makes a step
// that repeats bitwise; BEGIN_STEP refuses a wrong micro-batch count before
// anything ran; a BACKWARD without its FORWARD is an internal error.
#include "engine/step_executor.h"

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

// The components the facade builds over the parts.
struct Executor {
  explicit Executor(EngineParts* parts)
      : transport(nullptr, &parts->resources.tracker, Device::kCpu, &parts->resources.compute, nullptr,
                  parts->resources.num_units(), parts->resources.options.accumulation_steps),
        optimizer(&parts->resources, parts->state.get()),
        executor(&parts->resources, parts->state.get(), &transport, &optimizer) {}
  PipelineTransport transport;
  OptimizerPhase optimizer;
  StepExecutor executor;
};

class StepExecutorTest : public ::testing::Test {
 protected:
  std::unique_ptr<EngineParts> Parts(int stage, int k) {
    absl::StatusOr<std::unique_ptr<EngineParts>> parts =
        MakeEngineParts(ToyEngineConfig(stage, k), BuildToyModel(kToy), comms_[0].get());
    EXPECT_TRUE(parts.ok()) << parts.status();
    return parts.ok() ? std::move(*parts) : nullptr;
  }

  absl::StatusOr<StepResult> Train(EngineParts* parts, Executor* e, absl::Span<const Batch> batches, RunContext* run) {
    StepResult result;
    run->host_batches = batches;
    run->batches = batches;
    run->result = &result;
    run->timings = &result.timings;
    absl::Status s = e->executor.RunProgram(parts->resources.plan.train, run);
    if (!s.ok()) return s;
    return result;
  }

  std::vector<std::unique_ptr<Communicator>> comms_ = CreateThreadGroup(1);
  std::vector<HostBatch> host_ =
      MicroBatchesForRank(RandomTokens(7, 4, kToy.seq_len, kToy.vocab_size), 4, kToy.seq_len, 1, 2, 0);
  std::vector<Batch> batches_ = Views(host_);
};

TEST_F(StepExecutorTest, TrainProgramMakesAStepThatRepeats) {
  std::vector<float> losses;
  for (int run_index = 0; run_index < 2; ++run_index) {
    std::unique_ptr<EngineParts> parts = Parts(/*stage=*/3, /*k=*/2);
    ASSERT_NE(parts, nullptr);
    Executor e(parts.get());
    for (int step = 0; step < 2; ++step) {
      RunContext run;
      absl::StatusOr<StepResult> r = Train(parts.get(), &e, batches_, &run);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_TRUE(run.started);
      EXPECT_FALSE(r->skipped);
      EXPECT_TRUE(std::isfinite(r->loss));
      EXPECT_EQ(r->rows, 4);
      EXPECT_EQ(r->step, step + 1);
      losses.push_back(r->loss);
    }
    EXPECT_EQ(parts->state->attempts(), 2);
    EXPECT_GE(e.executor.peak_kept(), 1);
    EXPECT_GE(e.executor.peak_gathered(), 1);
  }
  EXPECT_EQ(losses[0], losses[2]);
  EXPECT_EQ(losses[1], losses[3]);
  EXPECT_NE(losses[0], losses[1]);
}

TEST_F(StepExecutorTest, BeginStepRefusesAWrongMicroBatchCount) {
  std::unique_ptr<EngineParts> parts = Parts(/*stage=*/1, /*k=*/1);
  ASSERT_NE(parts, nullptr);
  Executor e(parts.get());
  RunContext run;
  absl::StatusOr<StepResult> r = Train(parts.get(), &e, batches_, &run);  // 2 micro-batches
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "got 2 micro-batches, expected gradient_accumulation_steps=1"))
      << r.status();
  EXPECT_FALSE(run.started);
  EXPECT_EQ(parts->state->attempts(), 0);
}

TEST_F(StepExecutorTest, BackwardWithoutForwardIsAnInternalError) {
  std::unique_ptr<EngineParts> parts = Parts(/*stage=*/0, /*k=*/1);
  ASSERT_NE(parts, nullptr);
  Executor e(parts.get());
  StepProgram program;
  Action backward;
  backward.kind = ActionKind::kBackward;
  backward.unit = 1;
  backward.micro_batch = 0;
  program.actions.push_back(backward);
  RunContext run;
  run.batches = absl::MakeConstSpan(batches_).subspan(0, 1);
  const absl::Status s = e.executor.RunProgram(program, &run);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(s.message(), "has no saved activations")) << s;
}

}  // namespace
}  // namespace zeroshard
