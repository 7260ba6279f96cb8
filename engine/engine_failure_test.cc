// A failure on one rank after Create's fingerprints — an allocation in
// Create, in a step's staging buffers, in GatherParam — reaches every rank
// with the same code at once (the ranks agree on it on the control
// communicator), instead of leaving the others blocked in a collective until
// the watchdog. The failures are injected through the memory tracker's
// byte limits.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "comm/status_agreement.h"
#include "engine/engine.h"
#include "engine/observer.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/toy_model.h"
#include "gtest/gtest.h"
#include "sharding/testing/thread_communicator.h"

namespace zeroshard {
namespace {

constexpr int kDp = 3;
constexpr int kGlobalBatch = 12;

ToyModelConfig Toy() { return ToyModelConfig(); }

EngineConfig Config(int stage) {
  EngineConfig c;
  c.mutable_zero()->set_stage(stage);
  c.mutable_parallel()->set_dp(kDp);
  c.mutable_device()->set_threads_per_rank(1);
  return c;
}

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

template <typename Fn>
void OnRanks(Fn fn) {
  std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(kDp);
  std::vector<std::thread> threads;
  for (int r = 0; r < kDp; ++r) threads.emplace_back([&, r] { fn(r, comms[r].get()); });
  for (std::thread& t : threads) t.join();
}

absl::StatusOr<std::unique_ptr<Engine>> Create(int stage, Communicator* comm,
                                              const std::vector<EngineObserver*>& observers = {}) {
  return Engine::CreateWithCommunicator(Config(stage), comm, BuildToyModel(Toy()), observers);
}

// Sets a byte limit on one category before Create allocates the model state.
class LimitBeforeAllocation : public EngineObserver {
 public:
  LimitBeforeAllocation(MemoryCategory category, int64_t bytes) : category_(category), bytes_(bytes) {}
  void OnBeforeAllocation(MemoryTracker& tracker) override { tracker.SetLimit(category_, bytes_); }

 private:
  MemoryCategory category_;
  int64_t bytes_;
};

// What a rank that was fine returns for another rank's failure.
void ExpectRelayed(const absl::Status& s, absl::string_view expected) {
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(s.message(), expected);
  EXPECT_TRUE(IsRelayedError(s)) << s;
}

TEST(EngineFailureTest, AnAllocationFailingInCreateOnOneRankFailsCreateOnEveryRank) {
  for (int stage : {0, 3}) {
    SCOPED_TRACE(absl::StrCat("stage ", stage));
    OnRanks([&](int rank, Communicator* comm) {
      LimitBeforeAllocation starve(MemoryCategory::kOptimizerState, 0);
      std::vector<EngineObserver*> observers;
      if (rank == 1) observers.push_back(&starve);
      const Clock::time_point t0 = Clock::now();
      absl::StatusOr<std::unique_ptr<Engine>> engine = Create(stage, comm, observers);
      EXPECT_LT(SecondsSince(t0), 1.0);
      ASSERT_FALSE(engine.ok());
      if (rank == 1) {
        EXPECT_EQ(engine.status().code(), absl::StatusCode::kResourceExhausted);
        EXPECT_TRUE(absl::StrContains(engine.status().message(), "of optimizer_state (0 in use) exceeds its limit of 0"))
            << engine.status();
        EXPECT_FALSE(IsRelayedError(engine.status()));
      } else {
        ExpectRelayed(engine.status(), absl::StrCat("Engine::Create (allocating the model state) failed on dp rank 1 "
                                                    "(see its error); this rank (",
                                                    rank, ") was fine"));
      }
    });
  }
}

TEST(EngineFailureTest, AStagingBufferFailingOnOneRankStopsTheStepEverywhereAndNothingBreaks) {
  const std::vector<int32_t> tokens = RandomTokens(17, kGlobalBatch, Toy().seq_len, Toy().vocab_size);
  for (int stage : {0, 2}) {
    SCOPED_TRACE(absl::StrCat("stage ", stage));
    OnRanks([&](int rank, Communicator* comm) {
      absl::StatusOr<std::unique_ptr<Engine>> engine = Create(stage, comm);
      ASSERT_TRUE(engine.ok()) << engine.status();
      std::vector<HostBatch> batches = MicroBatchesForRank(tokens, kGlobalBatch, Toy().seq_len, kDp, 1, rank);
      // Stage 0-1 reserve the gradient shard, every stage the reduction's
      // staging (comm buffers), before the step starts.
      const MemoryCategory starved = stage <= 1 ? MemoryCategory::kGrads : MemoryCategory::kCommBuffers;
      const int64_t in_use = (*engine)->memory().Usage(starved).current;
      if (rank == 2) (*engine)->memory().SetLimit(starved, in_use);
      const Clock::time_point t0 = Clock::now();
      absl::StatusOr<StepResult> r = (*engine)->TrainStep({&batches[0].view, 1});
      EXPECT_LT(SecondsSince(t0), 1.0);
      ASSERT_FALSE(r.ok());
      if (rank == 2) {
        EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
        EXPECT_TRUE(absl::StrContains(r.status().message(), "exceeds its limit")) << r.status();
      } else {
        ExpectRelayed(r.status(), absl::StrCat("the step could not start on dp rank 2 (see its error); this rank (dp "
                                               "rank ",
                                               rank, ") was fine"));
      }
      // Nothing ran: with the memory back, the same step trains as step 1.
      (*engine)->memory().SetLimit(starved, -1);
      r = (*engine)->TrainStep({&batches[0].view, 1});
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->step, 1);
    });
  }
}

TEST(EngineFailureTest, GatherParamFailingOnOneRankFailsEverywhere) {
  OnRanks([&](int rank, Communicator* comm) {
    absl::StatusOr<std::unique_ptr<Engine>> engine = Create(3, comm);
    ASSERT_TRUE(engine.ok()) << engine.status();
    if (rank == 0) (*engine)->memory().SetLimit(MemoryCategory::kWorkspace, 0);
    const Clock::time_point t0 = Clock::now();
    absl::StatusOr<std::vector<float>> w = (*engine)->GatherParam("wte.weight");
    EXPECT_LT(SecondsSince(t0), 1.0);
    if (rank == 0) {
      EXPECT_EQ(w.status().code(), absl::StatusCode::kResourceExhausted) << w.status();
    } else {
      ExpectRelayed(w.status(),
                    absl::StrCat("GatherParam('wte.weight') failed on dp rank 0 (see its error); this rank (", rank,
                                 ") was fine"));
    }
    (*engine)->memory().SetLimit(MemoryCategory::kWorkspace, -1);
    w = (*engine)->GatherParam("wte.weight");
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(static_cast<int>(w->size()), Toy().vocab_size * Toy().n_embd);
  });
}

// A communicator that says its buffers live on a GPU; no call may reach it.
class CudaClaimingCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string& name() const override { return name_; }
  Device device() const override { return Device::kCuda; }
  std::unique_ptr<Work> AllGather(const void*, void*, int64_t, DType) override { return Unexpected(); }
  std::unique_ptr<Work> AllToAll(const void*, void*, int64_t, DType) override { return Unexpected(); }
  std::unique_ptr<Work> ReduceScatter(const void*, void*, int64_t, DType, ReduceOp) override { return Unexpected(); }
  std::unique_ptr<Work> AllReduce(void*, int64_t, DType, ReduceOp) override { return Unexpected(); }
  std::unique_ptr<Work> Broadcast(void*, int64_t, DType, int) override { return Unexpected(); }
  std::unique_ptr<Work> Send(const void*, int64_t, DType, int, int) override { return Unexpected(); }
  std::unique_ptr<Work> Recv(void*, int64_t, DType, int, int) override { return Unexpected(); }
  std::unique_ptr<Work> Barrier() override { return Unexpected(); }
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int, int, const std::string&) override {
    return absl::UnimplementedError("Split");
  }
  CommStats Stats() const override { return CommStats(); }

 private:
  std::unique_ptr<Work> Unexpected() {
    ADD_FAILURE() << "the engine issued a collective on a communicator of the wrong device";
    return nullptr;
  }
  std::string name_ = "dp";
};

TEST(EngineFailureTest, ACommunicatorOfAnotherDeviceIsRejectedNamingBoth) {
  CudaClaimingCommunicator comm;
  EngineConfig config = Config(0);
  config.mutable_parallel()->set_dp(1);
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::CreateWithCommunicator(config, &comm, BuildToyModel(Toy()));
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.status().message(),
            "the dp communicator 'dp' works on cuda buffers but engine.device.type is cpu; one communicator serves "
            "data and control here, so it must be a host (cpu) one: for CUDA use Engine::Create with "
            "CreateEngineRuntime's grid");
}

}  // namespace
}  // namespace zeroshard
