// Engine observers (engine/observer.h) over the toy model at dp 2: step and
// action events in program order with their waits and bytes, a gradient
// poisoned through OnReducedGradient skipping its step on every rank, and
// OnFinalGradient only for steps that update.
#include "engine/observer.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "engine/state_view.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/toy_model.h"
#include "gtest/gtest.h"
#include "sharding/testing/thread_communicator.h"

namespace zeroshard {
namespace {

constexpr int kDp = 2;
constexpr int kGlobalBatch = 4;
constexpr int kAccumulation = 2;
const ToyModelConfig kToy{2, 16, 67, 8};

EngineConfig Config(int stage) {
  EngineConfig c;
  c.mutable_zero()->set_stage(stage);
  c.mutable_parallel()->set_dp(kDp);
  c.set_gradient_accumulation_steps(kAccumulation);
  c.mutable_optimizer()->set_lr(1e-3);
  c.mutable_device()->set_threads_per_rank(1);
  return c;
}

template <typename Fn>
void OnRanks(Fn fn) {
  std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(kDp);
  std::vector<std::thread> threads;
  for (int r = 0; r < kDp; ++r) threads.emplace_back([&, r] { fn(r, comms[r].get()); });
  for (std::thread& t : threads) t.join();
}

// Everything it is told, in order.
class Recorder : public EngineObserver {
 public:
  struct Entry {
    char what;  // 'S' step start, 'E' step end, 'a' action start, 'b' action end
    int64_t attempt;
    int index;
    Action action;
  };
  void OnStepStart(const StepEvent& s) override { log.push_back({'S', s.attempt, -1, Action()}); }
  void OnStepEnd(const StepEvent& s, const StepResult& r) override {
    log.push_back({'E', s.attempt, -1, Action()});
    results.push_back(r);
  }
  void OnActionStart(const ActionEvent& a) override {
    log.push_back({'a', a.attempt, a.index, *a.action});
    bytes += a.bytes;
  }
  void OnActionEnd(const ActionEvent& a) override {
    log.push_back({'b', a.attempt, a.index, *a.action});
    EXPECT_GE(a.seconds, a.wait_seconds);
  }
  void OnWait(const WaitEvent& w) override {
    EXPECT_GT(w.seconds, 0) << WaitKindName(w.what);
    waited += w.seconds;
  }
  std::vector<Entry> log;
  std::vector<StepResult> results;
  int64_t bytes = 0;
  double waited = 0;
};

TEST(ObserverTest, ActionEventsArriveInProgramOrderBetweenTheStepEvents) {
  const std::vector<int32_t> tokens = RandomTokens(3, kGlobalBatch, kToy.seq_len, kToy.vocab_size);
  for (int stage : {1, 3}) {
    SCOPED_TRACE(absl::StrCat("stage ", stage));
    OnRanks([&](int rank, Communicator* comm) {
      Recorder recorder;
      auto engine = Engine::CreateWithCommunicator(Config(stage), comm, BuildToyModel(kToy), {&recorder});
      ASSERT_TRUE(engine.ok()) << engine.status();
      std::vector<HostBatch> batches =
          MicroBatchesForRank(tokens, kGlobalBatch, kToy.seq_len, kDp, kAccumulation, rank);
      constexpr int kSteps = 2;
      double waits = 0;
      for (int s = 0; s < kSteps; ++s) {
        absl::StatusOr<StepResult> r = (*engine)->TrainStep(Views(batches));
        ASSERT_TRUE(r.ok()) << r.status();
        const StepTimings& t = r->timings;
        waits += t.gather_wait + t.reduce_wait + t.pipeline_wait_forward + t.pipeline_wait_backward + t.publish_wait;
      }
      ASSERT_TRUE((*engine)->Evaluate(Views(batches)[0]).ok());  // not a step: no events
      const std::vector<Action>& program = (*engine)->train_program().actions;
      const size_t n = program.size();
      ASSERT_EQ(recorder.log.size(), kSteps * (2 * n + 2));
      int64_t program_bytes = 0;
      for (const Action& a : program) {
        for (const IssuedCollective& c : a.issues) program_bytes += c.bytes_per_rank;
      }
      for (int s = 0; s < kSteps; ++s) {
        const size_t base = s * (2 * n + 2);
        EXPECT_EQ(recorder.log[base].what, 'S');
        EXPECT_EQ(recorder.log[base].attempt, s);
        for (size_t i = 0; i < n; ++i) {
          for (int half = 0; half < 2; ++half) {
            const Recorder::Entry& e = recorder.log[base + 1 + 2 * i + half];
            EXPECT_EQ(e.what, half == 0 ? 'a' : 'b') << "step " << s << " action " << i;
            EXPECT_EQ(e.attempt, s);
            EXPECT_EQ(e.index, static_cast<int>(i));
            EXPECT_TRUE(e.action == program[i]) << "step " << s << " action " << i << ": "
                                                << FormatAction((*engine)->train_program(), e.action);
          }
        }
        EXPECT_EQ(recorder.log[base + 2 * n + 1].what, 'E');
        EXPECT_EQ(recorder.log[base + 2 * n + 1].attempt, s);
      }
      ASSERT_EQ(recorder.results.size(), static_cast<size_t>(kSteps));
      EXPECT_EQ(recorder.results[1].step, 2);
      EXPECT_EQ(recorder.bytes, kSteps * program_bytes);
      // The waits reported are the StepTimings waits, to rounding.
      EXPECT_NEAR(recorder.waited, waits, 1e-9);
      // Removed, it hears nothing more.
      (*engine)->RemoveObserver(&recorder);
      ASSERT_TRUE((*engine)->TrainStep(Views(batches)).ok());
      EXPECT_EQ(recorder.log.size(), kSteps * (2 * n + 2));
    });
  }
}

// This rank's f32 masters, every unit.
std::vector<float> Masters(const Engine& engine) {
  std::vector<float> out;
  const EngineStateView& view = engine.state();
  for (int u = 0; u < view.num_units(); ++u) {
    const StateRegion r = view.region(u, EngineStateView::kMaster);
    const float* p = static_cast<const float*>(view.data(u, EngineStateView::kMaster));
    out.insert(out.end(), p, p + r.length);
  }
  return out;
}

// Poisons one element of unit 1's reduced gradient on rank 1 at attempt 1,
// and counts the final gradients per attempt.
class Poisoner : public EngineObserver {
 public:
  explicit Poisoner(bool poisons) : poisons_(poisons) {}
  void OnReducedGradient(const GradientEvent& g) override {
    if (poisons_ && g.attempt == 1 && g.unit == 1 && g.numel > 0) g.shard[g.numel / 2] = NAN;
  }
  void OnFinalGradient(const GradientEvent& g) override {
    if (final_grads.size() <= static_cast<size_t>(g.attempt)) final_grads.resize(g.attempt + 1, 0);
    ++final_grads[g.attempt];
  }
  std::vector<int> final_grads;  // per attempt

 private:
  bool poisons_;
};

TEST(ObserverTest, AGradientPoisonedOnOneRankSkipsTheStepOnEveryRank) {
  const std::vector<int32_t> tokens = RandomTokens(4, kGlobalBatch, kToy.seq_len, kToy.vocab_size);
  for (int stage : {0, 2}) {
    SCOPED_TRACE(absl::StrCat("stage ", stage));
    OnRanks([&](int rank, Communicator* comm) {
      Poisoner poisoner(rank == 1);
      auto engine = Engine::CreateWithCommunicator(Config(stage), comm, BuildToyModel(kToy));
      ASSERT_TRUE(engine.ok()) << engine.status();
      (*engine)->AddObserver(&poisoner);
      int trainable = 0;
      for (int u = 0; u < (*engine)->num_units(); ++u) {
        trainable += (*engine)->trainable(u) && (*engine)->layout(u).numel() > 0 ? 1 : 0;
      }
      std::vector<HostBatch> batches =
          MicroBatchesForRank(tokens, kGlobalBatch, kToy.seq_len, kDp, kAccumulation, rank);
      std::vector<bool> skipped;
      std::vector<int64_t> steps;
      for (int attempt = 0; attempt < 3; ++attempt) {
        const std::vector<float> before = Masters(**engine);
        absl::StatusOr<StepResult> r = (*engine)->TrainStep(Views(batches));
        ASSERT_TRUE(r.ok()) << r.status();
        skipped.push_back(r->skipped);
        steps.push_back(r->step);
        const std::vector<float> after = Masters(**engine);
        const bool unchanged =
            before.size() == after.size() && std::memcmp(before.data(), after.data(), before.size() * 4) == 0;
        EXPECT_EQ(unchanged, r->skipped) << "attempt " << attempt;
      }
      EXPECT_EQ(skipped, (std::vector<bool>{false, true, false}));
      EXPECT_EQ(steps, (std::vector<int64_t>{1, 1, 2}));
      EXPECT_EQ(poisoner.final_grads, (std::vector<int>{trainable, 0, trainable}));
      EXPECT_EQ((*engine)->stats().skipped_steps, 1);
    });
  }
}

}  // namespace
}  // namespace zeroshard
