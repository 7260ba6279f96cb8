// The GPU's host-offload path (docs/offload.md, "Host offload on GPU") run
// on a CPU device, its copies memcpy, over GPT-2 tiny:
// * three training steps give bitwise the losses, gradient norms, final
//   gradients, masters, compute parameters and optimizer state of the same
//   run without offload — ZeRO 0-3, f32 and bf16 compute, dp 1 and 2
//   (thread ranks) — with the masters and state counted in their
//   categories; a skipped step too;
// * the memory plan counts what the path allocates;
// * the state view (what checkpoints use) reads, writes and commits the
//   host buffers;
// * the copies happen where the design puts them: each bucket's gradients
//   fetched at its last WAIT_REDUCE (stages 1-3; stage 0 at its UPDATE), waited
//   for in UPDATE, the parameters pushed in UPDATE, the compute stream
//   ordered in PUBLISH, everything drained at SCALER_UPDATE.
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "engine/engine_impl.h"
#include "engine/engine_options.h"
#include "engine/host_offload.h"
#include "engine/host_transfers.h"
#include "engine/memory_plan.h"
#include "engine/optimizer_phase.h"
#include "engine/pipeline_transport.h"
#include "engine/sharded_state.h"
#include "engine/step_executor.h"
#include "engine/step_plan.h"
#include "engine/step_program.h"
#include "engine/testing/engine_parts.h"
#include "engine/testing/function_observer.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/tiny_gpt2.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2.h"
#include "sharding/testing/thread_communicator.h"

namespace zeroshard {
namespace {

const Gpt2Config kModel = TinyGpt2();
constexpr int kSteps = 3;
constexpr int kGlobalBatch = 4;
constexpr int kMicroBatches = 2;

// A memcpy queue that logs each call ("to_host", "wait", "to_device",
// "order", "drain") into a shared log.
class RecordingTransfers : public HostTransfers {
 public:
  explicit RecordingTransfers(std::vector<std::string>* log) : log_(log) {}
  absl::StatusOr<int64_t> ToHost(void* host, const void* device, size_t bytes) override {
    log_->push_back("to_host");
    return inner_.ToHost(host, device, bytes);
  }
  absl::StatusOr<int64_t> ToDevice(void* device, const void* host, size_t bytes) override {
    log_->push_back("to_device");
    return inner_.ToDevice(device, host, bytes);
  }
  absl::Status WaitOnHost(int64_t ticket) override {
    log_->push_back("wait");
    return inner_.WaitOnHost(ticket);
  }
  absl::Status OrderCompute(int64_t ticket) override {
    log_->push_back("order");
    return inner_.OrderCompute(ticket);
  }
  absl::Status Drain() override {
    log_->push_back("drain");
    return inner_.Drain();
  }

 private:
  std::vector<std::string>* log_;
  MemcpyHostTransfers inner_;
};

EngineConfig Config(int stage, DTypeProto compute) {
  EngineConfig c = ToyEngineConfig(stage, kMicroBatches);
  c.mutable_precision()->set_compute_dtype(compute);
  // Small enough that every step clips: the unscale/clip multiply runs.
  c.mutable_optimizer()->set_grad_clip(0.05);
  return c;
}

// MakeEngineParts with the host-offload path switched on (HOST state and
// masters, the path forced on the CPU device).
// `replica`: hybrid sharding's replica group (null: none), `comm` then the
// shard group and `world` every rank.
absl::StatusOr<std::unique_ptr<EngineParts>> MakeParts(const EngineConfig& config, Communicator* comm, bool host,
                                                       Communicator* replica = nullptr, Communicator* world = nullptr) {
  auto parts = std::make_unique<EngineParts>();
  EngineResources& r = parts->resources;
  ASSIGN_OR_RETURN(r.options, EngineOptionsFromConfig(config));
  if (host) {
    r.options.offload.optimizer_state = r.options.offload.master_weights = OffloadTier::kHost;
    r.options.offload.host_update_on_cpu_device = true;
  }
  r.comms.dp = r.comms.control = r.comms.world = comm;
  if (world != nullptr) r.comms.control = r.comms.world = world;
  r.comms.replica = replica;
  ASSIGN_OR_RETURN(r.model, BuildGpt2(kModel));
  ASSIGN_OR_RETURN(r.plan, PlanStep(*r.model, r.options, comm->size(), /*stage=*/0));
  RETURN_IF_ERROR(r.InitDevice());
  ASSIGN_OR_RETURN(parts->state, ShardedState::Create(r.plan, *r.model, r.options, comm, replica,
                                                      /*embedding=*/nullptr, &r.tracker, r.compute,
                                                      r.timeline.get()));
  if (host != (parts->state->host_offload() != nullptr)) {
    return absl::InternalError(absl::StrCat("host offload ", host ? "missing" : "present"));
  }
  RETURN_IF_ERROR(parts->state->InitParams(*r.model, r.options.seed, /*tp_rank=*/0, /*tp_size=*/1));
  return parts;
}

// What one rank ends with.
struct RankRun {
  std::vector<float> losses, norms;
  std::vector<bool> skipped;
  std::vector<std::vector<float>> final_grads;  // per step and unit, concatenated
  std::vector<std::vector<char>> state;         // per unit: params, master, each state kind
  int64_t master_bytes = 0, state_bytes = 0;
  absl::Status status;
};

// Where a rank sits: its dp rank among `dp`, and under hybrid sharding its
// replica group and the group of every rank (`comm` is then its shard group).
struct RankPlace {
  int rank = 0;
  int dp = 1;
  Communicator* replica = nullptr;
  Communicator* world = nullptr;
};

// `poison_first`: the first attempt's reduced gradient gets a NaN, so that
// step is skipped.
absl::Status Train(Communicator* comm, const EngineConfig& config, bool host, RankPlace place, RankRun* out,
                   std::vector<std::string>* log = nullptr, bool poison_first = false) {
  ASSIGN_OR_RETURN(std::unique_ptr<EngineParts> parts, MakeParts(config, comm, host, place.replica, place.world));
  EngineResources& r = parts->resources;
  ShardedState& state = *parts->state;
  if (log != nullptr) state.host_offload()->set_transfers(std::make_unique<RecordingTransfers>(log));
  FunctionObserver observer;
  std::vector<float>* grads = nullptr;
  observer.final_gradient = [&](const GradientEvent& g) { grads->insert(grads->end(), g.shard, g.shard + g.numel); };
  observer.action_start = [&](const ActionEvent& a) {
    if (log == nullptr) return;
    const Action& act = *a.action;
    log->push_back(act.bucket >= 0 ? absl::StrCat(ActionKindName(act.kind), "(", act.bucket, ")")
                                   : std::string(ActionKindName(act.kind)));
  };
  observer.reduced_gradient = [&](const GradientEvent& g) {
    if (poison_first && g.attempt == 0 && g.numel > 0) g.shard[0] = std::numeric_limits<float>::quiet_NaN();
  };
  r.observers.push_back(&observer);
  PipelineTransport transport(nullptr, &r.tracker, Device::kCpu, &r.compute, nullptr, r.num_units(),
                              r.options.accumulation_steps);
  OptimizerPhase optimizer(&r, &state);
  StepExecutor executor(&r, &state, &transport, &optimizer);
  // At least one row per rank and micro-batch.
  const int global_batch = std::max(kGlobalBatch, kMicroBatches * place.dp);
  const std::vector<HostBatch> host_batches =
      MicroBatchesForRank(RandomTokens(5, global_batch, kModel.seq_len, kModel.vocab_size), global_batch,
                          kModel.seq_len, place.dp, kMicroBatches, place.rank);
  const std::vector<Batch> batches = Views(host_batches);
  for (int step = 0; step < kSteps; ++step) {
    StepResult result;
    RunContext run;
    run.host_batches = batches;
    run.batches = batches;
    run.result = &result;
    run.timings = &result.timings;
    out->final_grads.emplace_back();
    grads = &out->final_grads.back();
    RETURN_IF_ERROR(executor.RunProgram(r.plan.train, &run));
    out->skipped.push_back(result.skipped);
    if (result.skipped && !(poison_first && step == 0)) {
      return absl::InternalError(absl::StrCat("step ", step, " skipped"));
    }
    if (!result.skipped && result.grad_norm <= 0.05f) {
      return absl::InternalError(absl::StrCat("step ", step, " did not clip"));
    }
    out->losses.push_back(result.loss);
    out->norms.push_back(result.grad_norm);
  }
  const int kinds = static_cast<int>(state.optimizer().state_kinds().size());
  for (int u = 0; u < state.num_units(); ++u) {
    UnitShard& shard = *state.unit_shard(u);
    const int64_t c = static_cast<int64_t>(DTypeSize(r.options.compute_dtype));
    const bool sharded = shard.zero().shards_params();
    const int64_t n = sharded ? r.plan.layouts[u].shard_numel() : r.plan.layouts[u].padded_numel();
    const char* params = static_cast<const char*>(sharded ? shard.param_shard() : shard.full_params());
    out->state.emplace_back(params, params + n * c);
    std::vector<float> master(static_cast<size_t>(shard.master_numel()));
    RETURN_IF_ERROR(state.ReadMaster(u, 0, shard.master_numel(), master.data()));
    out->state.emplace_back(reinterpret_cast<const char*>(master.data()),
                            reinterpret_cast<const char*>(master.data() + master.size()));
    const int region = state.optimizer_region(u);
    for (int k = 0; k < kinds; ++k) {
      std::vector<float> s(region < 0 ? 0 : static_cast<size_t>(shard.master_numel()));
      if (region >= 0 && host) {
        RETURN_IF_ERROR(state.host_offload()->Read(region, k, 0, shard.master_numel(), s.data()));
      } else if (region >= 0) {
        std::memcpy(s.data(), state.optimizer().state(k, region).data(), s.size() * sizeof(float));
      }
      out->state.emplace_back(reinterpret_cast<const char*>(s.data()),
                              reinterpret_cast<const char*>(s.data() + s.size()));
    }
  }
  out->master_bytes = r.tracker.Usage(MemoryCategory::kMasterParams).current;
  out->state_bytes = r.tracker.Usage(MemoryCategory::kOptimizerState).current;
  return absl::OkStatus();
}

// Every rank of a dp group trains on its own thread.
std::vector<RankRun> TrainGroup(int dp, const EngineConfig& config, bool host, bool poison_first = false) {
  std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(dp);
  std::vector<RankRun> runs(dp);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < dp; ++rank) {
    threads.emplace_back([&, rank] {
      runs[rank].status = Train(comms[rank].get(), config, host, {rank, dp}, &runs[rank], nullptr, poison_first);
    });
  }
  for (std::thread& t : threads) t.join();
  return runs;
}

// Hybrid sharding over dp 4: shard groups {0, 1} and {2, 3}, replica groups
// {0, 2} and {1, 3}, every rank on its own thread.
std::vector<RankRun> TrainHybrid(const EngineConfig& config, bool host) {
  constexpr int kDp = 4, kShard = 2;
  std::vector<std::vector<std::unique_ptr<Communicator>>> shard_groups, replica_groups;
  for (int g = 0; g < kDp / kShard; ++g) shard_groups.push_back(CreateThreadGroup(kShard, "dp"));
  for (int g = 0; g < kShard; ++g) replica_groups.push_back(CreateThreadGroup(kDp / kShard, "dp_replica"));
  std::vector<std::unique_ptr<Communicator>> world = CreateThreadGroup(kDp, "world");
  std::vector<RankRun> runs(kDp);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kDp; ++rank) {
    threads.emplace_back([&, rank] {
      Communicator* shard = shard_groups[rank / kShard][rank % kShard].get();
      Communicator* replica = replica_groups[rank % kShard][rank / kShard].get();
      runs[rank].status = Train(shard, config, host, {rank, kDp, replica, world[rank].get()}, &runs[rank]);
    });
  }
  for (std::thread& t : threads) t.join();
  return runs;
}

// Every rank of `host` ended bitwise as in `plain`, its state in the same
// categories.
void ExpectBitwiseLikePlain(const std::vector<RankRun>& plain, const std::vector<RankRun>& host) {
  ASSERT_EQ(host.size(), plain.size());
  for (size_t rank = 0; rank < plain.size(); ++rank) {
    ASSERT_TRUE(plain[rank].status.ok()) << plain[rank].status;
    ASSERT_TRUE(host[rank].status.ok()) << host[rank].status;
    EXPECT_EQ(host[rank].losses, plain[rank].losses) << "rank " << rank;
    EXPECT_EQ(host[rank].norms, plain[rank].norms) << "rank " << rank;
    ASSERT_EQ(host[rank].final_grads.size(), plain[rank].final_grads.size());
    for (size_t s = 0; s < plain[rank].final_grads.size(); ++s) {
      ASSERT_FALSE(plain[rank].final_grads[s].empty());
      EXPECT_TRUE(host[rank].final_grads[s] == plain[rank].final_grads[s]) << "rank " << rank << " step " << s;
    }
    ASSERT_EQ(host[rank].state.size(), plain[rank].state.size());
    for (size_t i = 0; i < plain[rank].state.size(); ++i) {
      EXPECT_TRUE(host[rank].state[i] == plain[rank].state[i]) << "rank " << rank << " buffer " << i;
    }
    // The same classes, the same bytes: in host memory now.
    EXPECT_EQ(host[rank].master_bytes, plain[rank].master_bytes);
    EXPECT_EQ(host[rank].state_bytes, plain[rank].state_bytes);
    EXPECT_GT(host[rank].state_bytes, 0);
  }
  // Training moved the weights (the comparison is not of initial values).
  EXPECT_NE(plain[0].losses.front(), plain[0].losses.back());
}

class HostOffloadParityTest : public ::testing::TestWithParam<std::tuple<int, DTypeProto, int>> {};

TEST_P(HostOffloadParityTest, TrainsBitwiseLikeNoOffload) {
  const auto [stage, compute, dp] = GetParam();
  EngineConfig config = Config(stage, compute);
  config.mutable_parallel()->set_dp(dp);
  ExpectBitwiseLikePlain(TrainGroup(dp, config, /*host=*/false), TrainGroup(dp, config, /*host=*/true));
}

// Under hybrid sharding a bucket's shards go to the host only once its
// replica all-reduce has landed in them, not at its own WAIT_REDUCE.
TEST(HostOffloadHybridShardingTest, TrainsBitwiseLikeNoOffload) {
  for (int stage : {1, 3}) {
    SCOPED_TRACE(absl::StrCat("stage ", stage));
    EngineConfig config = Config(stage, F32);
    config.mutable_parallel()->set_dp(4);
    config.mutable_zero()->set_shard_group_size(2);
    ExpectBitwiseLikePlain(TrainHybrid(config, /*host=*/false), TrainHybrid(config, /*host=*/true));
  }
}

// A skipped step (a NaN in the first step's gradient) leaves the host
// masters and state alone, drains the copies it queued, and the run goes on
// bitwise like the run without offload.
TEST(HostOffloadSkipTest, ASkippedStepLeavesTheHostStateAndTheRunGoesOn) {
  for (int stage : {0, 1, 3}) {
    const EngineConfig config = Config(stage, BF16);
    const std::vector<RankRun> plain = TrainGroup(1, config, /*host=*/false, /*poison_first=*/true);
    const std::vector<RankRun> host = TrainGroup(1, config, /*host=*/true, /*poison_first=*/true);
    ASSERT_TRUE(plain[0].status.ok()) << plain[0].status;
    ASSERT_TRUE(host[0].status.ok()) << host[0].status;
    EXPECT_EQ(host[0].skipped, (std::vector<bool>{true, false, false})) << "stage " << stage;
    EXPECT_EQ(host[0].losses, plain[0].losses) << "stage " << stage;
    ASSERT_EQ(host[0].state.size(), plain[0].state.size());
    for (size_t i = 0; i < plain[0].state.size(); ++i) {
      EXPECT_TRUE(host[0].state[i] == plain[0].state[i]) << "stage " << stage << " buffer " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(StagesDtypesWorlds, HostOffloadParityTest,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3), ::testing::Values(F32, BF16),
                                            ::testing::Values(1, 2)));

// The memory plan of a GPU with HOST state and masters counts what the
// path allocates: both classes on the host tier, the pinned staging in
// offload_staging (host); a CPU device's HOST adds no staging.
TEST(HostOffloadPlanTest, PlanCountsWhatThePathAllocates) {
  for (int stage : {0, 1, 3}) {
    for (DTypeProto compute : {F32, BF16}) {
      std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(1);
      absl::StatusOr<std::unique_ptr<EngineParts>> parts = MakeParts(Config(stage, compute), comms[0].get(), true);
      ASSERT_TRUE(parts.ok()) << parts.status();
      const EngineResources& r = (*parts)->resources;
      MemoryPlanInputs in;
      in.options = r.options;
      in.options.device = Device::kCuda;
      in.plan = &r.plan;
      in.model = r.model.get();
      absl::StatusOr<MemoryPlan> plan = PlanMemory(in);
      ASSERT_TRUE(plan.ok()) << plan.status();
      const std::string what = absl::StrCat("stage ", stage, " ", DTypeProto_Name(compute));
      EXPECT_EQ(plan->tier_of(PlanCategory::kMasterWeights), OffloadTier::kHost) << what;
      EXPECT_EQ(plan->tier_of(PlanCategory::kOptimizerState), OffloadTier::kHost) << what;
      EXPECT_EQ(plan->ByTier(PlanCategory::kMasterWeights).host, r.tracker.Usage(MemoryCategory::kMasterParams).current)
          << what;
      EXPECT_EQ(plan->ByTier(PlanCategory::kOptimizerState).host,
                r.tracker.Usage(MemoryCategory::kOptimizerState).current)
          << what;
      const int64_t staging = r.tracker.Usage(MemoryCategory::kOffloadStaging).current;
      EXPECT_GT(staging, 0) << what;
      EXPECT_EQ(plan->ByTier(PlanCategory::kOffloadStaging).host, staging) << what;
      in.options.device = Device::kCpu;
      absl::StatusOr<MemoryPlan> cpu = PlanMemory(in);
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      EXPECT_EQ(cpu->bytes_of(PlanCategory::kOffloadStaging), 0) << what;
    }
  }
}

// The state view (what checkpoints save and load through) reads and writes
// the host buffers: master and state have no device pointer, Read gives the
// host master, a Write lands in the host buffers, and Commit rounds the
// written masters into the compute parameters.
TEST(HostOffloadStateViewTest, ReadsWritesAndCommitsTheHostBuffers) {
  std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(1);
  absl::StatusOr<std::unique_ptr<EngineParts>> parts = MakeParts(Config(3, BF16), comms[0].get(), true);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ShardedState& state = *(*parts)->state;
  HostOffload& host = *state.host_offload();
  EngineStateViewImpl view;
  view.Init(&state, DType::kBF16);
  const int master = view.FindKind("master");
  const int first_state = EngineStateView::kFirstOptimizerKind;
  ASSERT_GE(master, 0);
  ASSERT_GT(view.num_kinds(), first_state);
  int checked = 0;
  for (int u = 0; u < view.num_units(); ++u) {
    const int region = state.optimizer_region(u);
    const int64_t n = view.region(u, master).length;
    if (region < 0 || n == 0) continue;
    ++checked;
    EXPECT_EQ(view.data(u, master), nullptr) << u;
    EXPECT_EQ(view.data(u, first_state), nullptr) << u;
    std::vector<float> read(static_cast<size_t>(n));
    ASSERT_TRUE(view.Read(u, master, 0, n, read.data()).ok());
    EXPECT_EQ(std::memcmp(read.data(), host.master(region), n * sizeof(float)), 0) << u;
    std::vector<float> written(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) written[i] = 0.5f + static_cast<float>(i % 97) / 1024.0f + 1.0f / 4096;
    ASSERT_TRUE(view.Write(u, master, 0, n, written.data()).ok());
    ASSERT_TRUE(view.Write(u, first_state, 0, n, written.data()).ok());
    EXPECT_EQ(std::memcmp(host.master(region), written.data(), n * sizeof(float)), 0) << u;
    EXPECT_EQ(std::memcmp(host.state(region, 0), written.data(), n * sizeof(float)), 0) << u;
  }
  ASSERT_GT(checked, 0);
  ASSERT_TRUE(view.Commit().ok());
  for (int u = 0; u < view.num_units(); ++u) {
    const int region = state.optimizer_region(u);
    const int64_t n = view.region(u, master).length;
    if (region < 0 || n == 0) continue;
    const uint16_t* params = static_cast<const uint16_t*>(state.unit_shard(u)->param_shard());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(params[i], F32ToBF16(host.master(region)[i])) << "unit " << u << " element " << i;
    }
  }
}

// Position of the first entry equal to `what` at or after `from`; -1 if none.
int Find(const std::vector<std::string>& log, const std::string& what, int from = 0) {
  for (int i = from; i < static_cast<int>(log.size()); ++i) {
    if (log[i] == what) return i;
  }
  return -1;
}

class HostOffloadOrderTest : public ::testing::TestWithParam<int> {};

TEST_P(HostOffloadOrderTest, CopiesRunWhereTheDesignPutsThem) {
  const int stage = GetParam();
  std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(1);
  const EngineConfig config = Config(stage, BF16);
  std::vector<std::string> log;
  RankRun run;
  ASSERT_TRUE(Train(comms[0].get(), config, /*host=*/true, RankPlace{}, &run, &log).ok());
  ASSERT_EQ(static_cast<int>(run.losses.size()), kSteps);
  absl::StatusOr<std::unique_ptr<EngineParts>> parts = MakeParts(config, comms[0].get(), /*host=*/true);
  ASSERT_TRUE(parts.ok()) << parts.status();
  const StepPlan& plan = (*parts)->resources.plan;
  const ShardedState& state = *(*parts)->state;
  // The last step's entries: from its BEGIN_STEP on.
  int begin = -1;
  for (int i = 0; i < static_cast<int>(log.size()); ++i) {
    if (log[i].rfind("BEGIN_STEP", 0) == 0) begin = i;
  }
  ASSERT_GE(begin, 0);
  const std::vector<std::string> step(log.begin() + begin, log.end());
  const int reduce_norm = Find(step, "REDUCE_NORM");
  ASSERT_GT(reduce_norm, 0);
  int regions_seen = 0;
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    int with_region = 0;
    for (int u : plan.buckets[b].units) with_region += state.optimizer_region(u) >= 0 ? 1 : 0;
    if (with_region == 0) continue;
    regions_seen += with_region;
    const std::string id = absl::StrCat("(", b, ")");
    // The bucket's last WAIT_REDUCE: one per micro-batch, the last leaves
    // the final shard.
    int wait_reduce = -1;
    for (int at = Find(step, "WAIT_REDUCE" + id); at >= 0; at = Find(step, "WAIT_REDUCE" + id, at + 1)) {
      if (wait_reduce >= 0) {
        EXPECT_NE(step[wait_reduce + 1], "to_host") << id << ": fetched before the last reduction";
      }
      wait_reduce = at;
    }
    const int update = Find(step, "UPDATE" + id);
    const int publish = Find(step, "PUBLISH" + id);
    ASSERT_GE(wait_reduce, 0) << id;
    ASSERT_GT(update, reduce_norm) << id;
    ASSERT_GT(publish, update) << id;
    // Gradients: fetched right at the bucket's WAIT_REDUCE (stage 0: at
    // its UPDATE, after the all-gather), waited for in UPDATE.
    const int fetched_at = stage == 0 ? update : wait_reduce;
    for (int k = 1; k <= with_region; ++k) EXPECT_EQ(step[fetched_at + k], "to_host") << id << " " << k;
    const std::vector<std::string> in_update(step.begin() + update + 1, step.begin() + publish);
    EXPECT_EQ(Find(in_update, "wait"), stage == 0 ? with_region : 0) << id;
    int pushes = 0;
    for (const std::string& e : in_update) pushes += e == "to_device" ? 1 : 0;
    EXPECT_EQ(pushes, with_region) << id;
    // PUBLISH: the compute stream waits for each pushed region.
    for (int k = 1; k <= with_region; ++k) EXPECT_EQ(step[publish + k], "order") << id << " " << k;
  }
  EXPECT_GT(regions_seen, 0);
  const int scaler = Find(step, "SCALER_UPDATE");
  ASSERT_GT(scaler, 0);
  EXPECT_EQ(Find(step, "drain", scaler), scaler + 1);
}

INSTANTIATE_TEST_SUITE_P(Stages, HostOffloadOrderTest, ::testing::Values(0, 1, 3));

}  // namespace
}  // namespace zeroshard
