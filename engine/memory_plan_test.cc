// The memory planner against what the engine allocates: the model state
// exactly (stages 0-3 after Engine::Create; each pipeline stage's state as
// ShardedState allocates it), activations within 5 % of a real step's
// kActivations peak, and the limit, floor, refusal and directory messages.
#include "engine/memory_plan.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "engine/engine.h"
#include "engine/engine_options.h"
#include "engine/engine_resources.h"
#include "engine/sharded_state.h"
#include "engine/state_view.h"
#include "engine/step_plan.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/tiny_gpt2.h"
#include "gtest/gtest.h"
#include "sharding/testing/thread_communicator.h"

namespace zeroshard {
namespace {

constexpr int kRows = 4;  // micro-batch rows

EngineConfig Config(int stage) {
  EngineConfig c;
  c.mutable_zero()->set_stage(stage);
  c.mutable_zero()->set_bucket_bytes(4096);
  c.mutable_device()->set_threads_per_rank(1);
  c.mutable_optimizer()->set_lr(1e-3);
  c.mutable_lr_schedule()->set_type(LrScheduleConfig::CONSTANT);
  return c;
}

absl::StatusOr<MemoryPlan> Plan(const EngineOptions& options, const StepPlan& plan, const Model& model,
                                int64_t batch, int64_t seq) {
  MemoryPlanInputs in;
  in.options = options;
  in.plan = &plan;
  in.model = &model;
  in.micro_batch = batch;
  in.sequence_length = seq;
  return PlanMemory(in);
}

void ExpectStateMatches(const MemoryPlan& plan, const MemoryTracker& m, const std::string& what) {
  EXPECT_EQ(plan.bytes_of(PlanCategory::kParams), m.Usage(MemoryCategory::kParams).current) << what;
  EXPECT_EQ(plan.bytes_of(PlanCategory::kMasterWeights), m.Usage(MemoryCategory::kMasterParams).current) << what;
  EXPECT_EQ(plan.bytes_of(PlanCategory::kGrads), m.Usage(MemoryCategory::kGrads).current) << what;
  EXPECT_EQ(plan.bytes_of(PlanCategory::kOptimizerState), m.Usage(MemoryCategory::kOptimizerState).current) << what;
}

TEST(MemoryPlanTest, ModelStateIsExactlyWhatTheEngineAllocatesAtEveryStage) {
  for (int stage = 0; stage <= 3; ++stage) {
    for (OptimizerConfig::Type type : {OptimizerConfig::ADAMW, OptimizerConfig::SGD}) {
      EngineConfig config = Config(stage);
      config.mutable_optimizer()->set_type(type);
      config.mutable_precision()->set_compute_dtype(stage == 1 ? BF16 : F32);
      auto comms = CreateThreadGroup(1);
      absl::StatusOr<std::unique_ptr<Engine>> engine =
          Engine::CreateWithCommunicator(config, comms[0].get(), BuildGpt2(TinyGpt2()).value());
      ASSERT_TRUE(engine.ok()) << engine.status();
      absl::StatusOr<EngineOptions> options = EngineOptionsFromConfig(config);
      ASSERT_TRUE(options.ok());
      std::unique_ptr<Model> model = BuildGpt2(TinyGpt2()).value();
      absl::StatusOr<MemoryPlan> plan = Plan(*options, (*engine)->plan(), *model, kRows, 8);
      ASSERT_TRUE(plan.ok()) << plan.status();
      ExpectStateMatches(*plan, (*engine)->memory(), absl::StrCat("stage ", stage, " ", type));
    }
  }
}

// Pipeline stages hold different units (and the head's mirror of wte):
// each stage's state as ShardedState::Create allocates it.
TEST(MemoryPlanTest, EachPipelineStageStateIsExact) {
  EngineConfig config = Config(1);
  config.mutable_parallel()->set_pp(2);
  config.set_gradient_accumulation_steps(2);
  absl::StatusOr<EngineOptions> options = EngineOptionsFromConfig(config);
  ASSERT_TRUE(options.ok()) << options.status();
  std::unique_ptr<Model> model = BuildGpt2(TinyGpt2(3)).value();
  for (int stage = 0; stage < 2; ++stage) {
    absl::StatusOr<StepPlan> step = PlanStep(*model, *options, 1, stage);
    ASSERT_TRUE(step.ok()) << step.status();
    auto comms = CreateThreadGroup(1);
    MemoryTracker tracker;
    ComputeContext compute;
    compute.kernels = kernels::KernelContext::Cpu(1);
    compute.tracker = &tracker;
    absl::StatusOr<std::unique_ptr<ShardedState>> state =
        ShardedState::Create(*step, *model, *options, comms[0].get(), nullptr, comms[0].get(), &tracker, compute,
                             nullptr);
    ASSERT_TRUE(state.ok()) << state.status();
    absl::StatusOr<MemoryPlan> plan = Plan(*options, *step, *model, kRows, 8);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ExpectStateMatches(*plan, tracker, absl::StrCat("pp stage ", stage));
    EXPECT_GT(plan->bytes_of(PlanCategory::kActivations), 0);
    // Masters and AdamW's two moments only for the units the stage computes:
    // the last stage's wte mirror has its parameters and gradient only.
    int64_t computed = 0;
    for (size_t u = 0; u < step->units.size(); ++u) {
      if (step->units[u].computed) computed += step->layouts[u].padded_numel();
    }
    EXPECT_EQ(step->units[0].mirror, stage == 1);
    EXPECT_EQ(plan->bytes_of(PlanCategory::kMasterWeights), computed * 4) << "stage " << stage;
    EXPECT_EQ(plan->bytes_of(PlanCategory::kOptimizerState), computed * 8) << "stage " << stage;
  }
}

TEST(MemoryPlanTest, ActivationEstimateIsWithinFivePercentOfAStep) {
  const std::vector<std::pair<ActivationCheckpointingConfig::Policy, bool>> modes = {
      {ActivationCheckpointingConfig::NONE, false},
      {ActivationCheckpointingConfig::EVERY_UNIT, false},
      {ActivationCheckpointingConfig::NONE, true}};
  for (const auto& [policy, selective] : modes) {
    EngineConfig config = Config(0);
    config.mutable_activation_checkpointing()->set_policy(policy);
    config.mutable_activation_checkpointing()->set_selective(selective);
    auto comms = CreateThreadGroup(1);
    const Gpt2Config gpt = TinyGpt2();
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::CreateWithCommunicator(config, comms[0].get(), BuildGpt2(gpt).value());
    ASSERT_TRUE(engine.ok()) << engine.status();
    std::vector<HostBatch> batches =
        MicroBatchesForRank(RandomTokens(7, kRows, gpt.seq_len, gpt.vocab_size), kRows, gpt.seq_len, 1, 1, 0);
    (*engine)->memory().ResetPeaks();
    ASSERT_TRUE((*engine)->TrainStep(Views(batches)).ok());
    const int64_t measured = (*engine)->memory().Usage(MemoryCategory::kActivations).peak;
    absl::StatusOr<EngineOptions> options = EngineOptionsFromConfig(config);
    std::unique_ptr<Model> model = BuildGpt2(gpt).value();
    absl::StatusOr<MemoryPlan> plan = Plan(*options, (*engine)->plan(), *model, kRows, gpt.seq_len);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_GT(measured, 0);
    const int64_t planned = plan->bytes_of(PlanCategory::kActivations);
    EXPECT_NEAR(static_cast<double>(planned), static_cast<double>(measured), 0.05 * measured)
        << "policy " << policy << " selective " << selective << ": planned " << planned << ", measured " << measured;
  }
}

// Selective checkpointing: each block's planned share is its selective
// estimate, 6·N·C elements below a full save (ln_1, ln_2 and GELU outputs),
// and the plan names the selective units.
TEST(MemoryPlanTest, SelectiveCheckpointingPlansEachBlockWithoutItsRecomputedOutputs) {
  const Gpt2Config gpt = TinyGpt2();
  std::unique_ptr<Model> model = BuildGpt2(gpt).value();
  int64_t planned[2] = {0, 0};
  std::vector<std::string> notes;
  for (int selective = 0; selective < 2; ++selective) {
    EngineConfig config = Config(0);
    config.mutable_activation_checkpointing()->set_selective(selective == 1);
    absl::StatusOr<EngineOptions> options = EngineOptionsFromConfig(config);
    ASSERT_TRUE(options.ok()) << options.status();
    absl::StatusOr<StepPlan> step = PlanDataParallelStep(*model, *options, 1);
    ASSERT_TRUE(step.ok()) << step.status();
    absl::StatusOr<MemoryPlan> plan = Plan(*options, *step, *model, kRows, gpt.seq_len);
    ASSERT_TRUE(plan.ok()) << plan.status();
    planned[selective] = plan->bytes_of(PlanCategory::kActivations);
    notes = plan->notes;
  }
  const int64_t n = kRows * gpt.seq_len;
  EXPECT_EQ(planned[0] - planned[1], gpt.n_layer * 6 * n * gpt.n_embd * 4);
  EXPECT_NE(std::find(notes.begin(), notes.end(),
                      "activations: checkpointed selectively (GEMM outputs kept, the rest recomputed in backward): "
                      "h.0, h.1"),
            notes.end())
      << absl::StrJoin(notes, "\n");
}

TEST(MemoryPlanTest, EngineCreateRefusesAPlanOverTheLimit) {
  EngineConfig config = Config(0);
  config.set_memory_limit_mib(1);
  auto comms = CreateThreadGroup(1);
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::CreateWithCommunicator(config, comms[0].get(), BuildGpt2(TinyGpt2()).value());
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StartsWith(engine.status().message(),
                               "memory plan exceeds the limit: the limit is below the plan's floor (every state class "
                               "offloaded: 277."))
      << engine.status();
  EXPECT_NE(engine.status().message().find("limit 1.00 MiB"), absl::string_view::npos) << engine.status();
}

// A plan with round numbers: 1 GiB of each state class.
MemoryPlan RoundPlan() {
  MemoryPlan p;
  p.rank = 2;
  for (int k = 0; k < kNumPlanCategories; ++k) p.tier[k] = OffloadTier::kDevice;
  p.tier[static_cast<int>(PlanCategory::kOffloadStaging)] = OffloadTier::kHost;
  p.tier[static_cast<int>(PlanCategory::kUntracked)] = OffloadTier::kHost;
  const int64_t G = int64_t{1} << 30;
  p.bytes[static_cast<int>(PlanCategory::kParams)] = G;
  p.bytes[static_cast<int>(PlanCategory::kMasterWeights)] = 2 * G;
  p.bytes[static_cast<int>(PlanCategory::kGrads)] = G;
  p.bytes[static_cast<int>(PlanCategory::kOptimizerState)] = 4 * G;
  p.bytes[static_cast<int>(PlanCategory::kUntracked)] = G / 4;
  p.file_bytes[static_cast<int>(PlanCategory::kMasterWeights)] = 2 * G;
  p.file_bytes[static_cast<int>(PlanCategory::kOptimizerState)] = 4 * G;
  p.staging_pool_bytes = G / 4;
  return p;
}

TEST(MemoryPlanTest, RefusalNamesTheNeedTheLargestAndTheSettingThatFits) {
  const MemoryPlan p = RoundPlan();  // 8.25 GiB resident
  const int64_t G = int64_t{1} << 30;
  EXPECT_EQ(p.resident_bytes(), 8 * G + G / 4);
  EXPECT_TRUE(CheckMemoryPlan(p, 9 * G).ok());
  absl::Status s = CheckMemoryPlan(p, 5 * G);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "memory plan exceeds the limit: rank 2 needs 8.25 GiB resident, limit 5.00 GiB; largest: optimizer_state "
            "4.00 GiB, master_weights 2.00 GiB, params 1.00 GiB; set engine.offload.optimizer_state: NVME (needs "
            "4.50 GiB resident, 4.3 GB in nvme_dir)");
  s = CheckMemoryPlan(p, 3 * G);
  EXPECT_EQ(s.message(),
            "memory plan exceeds the limit: rank 2 needs 8.25 GiB resident, limit 3.00 GiB; largest: optimizer_state "
            "4.00 GiB, master_weights 2.00 GiB, params 1.00 GiB; set engine.offload.optimizer_state: NVME and "
            "engine.offload.master_weights: NVME (needs 2.50 GiB resident, 6.4 GB in nvme_dir)");
  s = CheckMemoryPlan(p, G);
  EXPECT_EQ(s.message(),
            "memory plan exceeds the limit: the limit is below the plan's floor (every state class offloaded: 2.50 "
            "GiB); rank 2 needs 8.25 GiB resident, limit 1.00 GiB; largest: optimizer_state 4.00 GiB, master_weights "
            "2.00 GiB, params 1.00 GiB");
  EXPECT_EQ(p.Floor().nvme_bytes(), 6 * G);
  EXPECT_EQ(p.Floor().bytes_of(PlanCategory::kOffloadStaging), G / 4);
}

// Stage 3 with the parameter shards offloadable: the floor and the refusal
// take params to NVME as the third setting, with their param slots.
TEST(MemoryPlanTest, RefusalAndFloorIncludeParamsOnNvmeAtStage3) {
  MemoryPlan p = RoundPlan();
  const int64_t G = int64_t{1} << 30;
  p.params_offloadable = true;
  p.file_bytes[static_cast<int>(PlanCategory::kParams)] = G;
  p.param_pool_bytes = G / 4;
  EXPECT_EQ(CheckMemoryPlan(p, 2 * G).message(),
            "memory plan exceeds the limit: rank 2 needs 8.25 GiB resident, limit 2.00 GiB; largest: optimizer_state "
            "4.00 GiB, master_weights 2.00 GiB, params 1.00 GiB; set engine.offload.optimizer_state: NVME and "
            "engine.offload.master_weights: NVME and engine.offload.params: NVME (needs 1.75 GiB resident, 7.5 GB in "
            "nvme_dir)");
  const MemoryPlan floor = p.Floor();
  EXPECT_EQ(floor.tier_of(PlanCategory::kParams), OffloadTier::kNvme);
  EXPECT_EQ(floor.bytes_of(PlanCategory::kOffloadStaging), G / 2);
  EXPECT_EQ(floor.resident_bytes(), G + G / 4 + G / 2);
  // Params alone on NVME: only their slots stage.
  OffloadOptions params;
  params.params = OffloadTier::kNvme;
  EXPECT_EQ(p.WithOffload(params).bytes_of(PlanCategory::kOffloadStaging), G / 4);
}

// Stages 2-3: the refusal takes grads to NVME after the other classes, with their two grad staging buffers.
TEST(MemoryPlanTest, RefusalAndFloorIncludeGradsOnNvme) {
  MemoryPlan p = RoundPlan();
  const int64_t G = int64_t{1} << 30;
  p.file_bytes[static_cast<int>(PlanCategory::kGrads)] = G;
  EXPECT_EQ(p.Floor().tier_of(PlanCategory::kGrads), OffloadTier::kDevice);  // not offloadable: resident
  p.grads_offloadable = true;
  p.grad_pool_bytes = G / 8;
  EXPECT_EQ(CheckMemoryPlan(p, G + 3 * G / 4).message(),
            "memory plan exceeds the limit: rank 2 needs 8.25 GiB resident, limit 1.75 GiB; largest: optimizer_state "
            "4.00 GiB, master_weights 2.00 GiB, params 1.00 GiB; set engine.offload.optimizer_state: NVME and "
            "engine.offload.master_weights: NVME and engine.offload.grads: NVME (needs 1.62 GiB resident, 7.5 GB in "
            "nvme_dir)");
  const MemoryPlan floor = p.Floor();
  EXPECT_EQ(floor.tier_of(PlanCategory::kGrads), OffloadTier::kNvme);
  EXPECT_EQ(floor.bytes_of(PlanCategory::kOffloadStaging), G / 4 + G / 8);
  EXPECT_EQ(floor.resident_bytes(), G + G / 4 + G / 4 + G / 8);
}

// engine.offload.params: NVME as the engine allocates it: no parameter
// shard resident, the file's bytes on NVMe, the param slots staged.
TEST(MemoryPlanTest, ParamsOnNvmeAreWhatTheEngineAllocates) {
  EngineConfig config = Config(3);
  config.mutable_precision()->set_compute_dtype(BF16);
  const char* tmp = std::getenv("TEST_TMPDIR");
  config.mutable_offload()->set_nvme_dir(tmp != nullptr ? tmp : "/tmp");
  config.mutable_offload()->set_params(NVME);
  auto comms = CreateThreadGroup(1);
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::CreateWithCommunicator(config, comms[0].get(), BuildGpt2(TinyGpt2()).value());
  ASSERT_TRUE(engine.ok()) << engine.status();
  absl::StatusOr<EngineOptions> options = EngineOptionsFromConfig(config);
  ASSERT_TRUE(options.ok());
  std::unique_ptr<Model> model = BuildGpt2(TinyGpt2()).value();
  absl::StatusOr<MemoryPlan> plan = Plan(*options, (*engine)->plan(), *model, kRows, 8);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const MemoryTracker& m = (*engine)->memory();
  const TierBytes params = plan->ByTier(PlanCategory::kParams);
  EXPECT_EQ(params.device + params.host, 0);
  EXPECT_EQ(m.Usage(MemoryCategory::kParams).current, 0);
  EXPECT_GT(params.nvme, 0);
  EXPECT_EQ(plan->bytes_of(PlanCategory::kMasterWeights), m.Usage(MemoryCategory::kMasterParams).current);
  EXPECT_EQ(plan->bytes_of(PlanCategory::kOptimizerState), m.Usage(MemoryCategory::kOptimizerState).current);
  EXPECT_GT(plan->bytes_of(PlanCategory::kOffloadStaging), 0);
  EXPECT_EQ(plan->bytes_of(PlanCategory::kOffloadStaging), m.Usage(MemoryCategory::kOffloadStaging).current);
  EXPECT_EQ(plan->nvme_bytes(), plan->file_bytes[static_cast<int>(PlanCategory::kParams)]);
}

// engine.offload.grads: NVME (stages 2-3) as the engine allocates it: no
// gradient shard resident, the shards' file on NVMe, and the staging the
// optimizer's pool and the two grad staging buffers (the largest bucket's
// aligned shards each) take.
TEST(MemoryPlanTest, GradsOnNvmeAreWhatTheEngineAllocates) {
  for (int stage : {2, 3}) {
    SCOPED_TRACE(absl::StrCat("stage ", stage));
    EngineConfig config = Config(stage);
    const char* tmp = std::getenv("TEST_TMPDIR");
    config.mutable_offload()->set_nvme_dir(tmp != nullptr ? tmp : "/tmp");
    config.mutable_offload()->set_grads(NVME);
    auto comms = CreateThreadGroup(1);
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::CreateWithCommunicator(config, comms[0].get(), BuildGpt2(TinyGpt2()).value());
    ASSERT_TRUE(engine.ok()) << engine.status();
    // The engine's options: buffer_count as the planner chose it.
    std::unique_ptr<Model> model = BuildGpt2(TinyGpt2()).value();
    absl::StatusOr<MemoryPlan> plan = Plan((*engine)->options(), (*engine)->plan(), *model, kRows, 8);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const MemoryTracker& m = (*engine)->memory();
    EXPECT_EQ(plan->tier_of(PlanCategory::kGrads), OffloadTier::kNvme);
    const TierBytes grads = plan->ByTier(PlanCategory::kGrads);
    EXPECT_EQ(grads.device + grads.host, 0);
    EXPECT_EQ(m.Usage(MemoryCategory::kGrads).current, 0);
    EXPECT_EQ(plan->nvme_bytes(), plan->file_bytes[static_cast<int>(PlanCategory::kGrads)]);
    EXPECT_GT(plan->grad_pool_bytes, 0);
    // Planned: the pools, the bounce buffer and a checkpoint's one-region
    // copy; allocated by Create: the pools (the bounce buffer comes with the
    // first state-view read, the copy with a checkpoint).
    EXPECT_EQ(plan->bytes_of(PlanCategory::kOffloadStaging), plan->staging_pool_bytes + plan->grad_pool_bytes +
                                                                 plan->bounce_bytes + plan->checkpoint_copy_bytes);
    EXPECT_EQ(plan->staging_pool_bytes + plan->grad_pool_bytes, m.Usage(MemoryCategory::kOffloadStaging).current);
    EXPECT_EQ(plan->bytes_of(PlanCategory::kParams), m.Usage(MemoryCategory::kParams).current);
    EXPECT_EQ(plan->bytes_of(PlanCategory::kMasterWeights), m.Usage(MemoryCategory::kMasterParams).current);
    EXPECT_EQ(plan->bytes_of(PlanCategory::kOptimizerState), m.Usage(MemoryCategory::kOptimizerState).current);
  }
}

// The largest bucket's shards, each rounded up to the I/O alignment: what
// each of the two grad staging buffers holds.
int64_t LargestBucketShards(const StepPlan& step) {
  int64_t largest = 0;
  for (const GradBucket& b : step.buckets) {
    int64_t bytes = 0;
    for (int u : b.units) {
      if (step.units[u].optimized()) bytes += AlignIo(step.layouts[u].shard_numel() * 4);
    }
    largest = std::max(largest, bytes);
  }
  return largest;
}

// Gradient shards on NVMe under a pipeline (each stage's own units; the
// last stage's wte mirror keeps its shard resident) and under hybrid
// sharding (a bucket holds its buffer until its replica all-reduce lands):
// the same two buffers, counted as each stage's ShardedState allocates
// them, and the other shards leave memory.
TEST(MemoryPlanTest, GradsOnNvmeUnderAPipelineAndHybridShardingCountTheirStaging) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  auto streamed = [&](EngineConfig config) {
    config.mutable_offload()->set_nvme_dir(tmp != nullptr ? tmp : "/tmp");
    config.mutable_offload()->set_grads(NVME);
    config.mutable_offload()->set_buffer_count(2);
    config.mutable_offload()->set_buffer_bytes(16384);
    return config;
  };
  std::unique_ptr<Model> model = BuildGpt2(TinyGpt2(3)).value();
  EngineConfig pipeline = Config(2);
  pipeline.mutable_parallel()->set_pp(2);
  pipeline.set_gradient_accumulation_steps(3);
  absl::StatusOr<EngineOptions> options = EngineOptionsFromConfig(streamed(pipeline));
  ASSERT_TRUE(options.ok()) << options.status();
  for (int stage = 0; stage < 2; ++stage) {
    SCOPED_TRACE(absl::StrCat("pp stage ", stage));
    absl::StatusOr<StepPlan> step = PlanStep(*model, *options, 1, stage);
    ASSERT_TRUE(step.ok()) << step.status();
    auto comms = CreateThreadGroup(1);
    MemoryTracker tracker;
    ComputeContext compute;
    compute.kernels = kernels::KernelContext::Cpu(1);
    compute.tracker = &tracker;
    absl::StatusOr<std::unique_ptr<ShardedState>> state =
        ShardedState::Create(*step, *model, *options, comms[0].get(), nullptr, comms[0].get(), &tracker, compute,
                             nullptr);
    ASSERT_TRUE(state.ok()) << state.status();
    absl::StatusOr<MemoryPlan> plan = Plan(*options, *step, *model, kRows, 8);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->tier_of(PlanCategory::kGrads), OffloadTier::kNvme);
    // Only the mirror's shard stays (it has no optimizer region to stream with).
    const int64_t mirror_shard = stage == 1 ? step->layouts[0].shard_numel() * 4 : 0;
    EXPECT_EQ(tracker.Usage(MemoryCategory::kGrads).current, mirror_shard);
    EXPECT_EQ(plan->ByTier(PlanCategory::kGrads).device, mirror_shard);
    EXPECT_EQ(plan->grad_pool_bytes, 2 * LargestBucketShards(*step));
    EXPECT_GT(plan->grad_pool_bytes, 0);
    EXPECT_EQ(plan->staging_pool_bytes + plan->grad_pool_bytes, tracker.Usage(MemoryCategory::kOffloadStaging).current);
    EXPECT_EQ(plan->bytes_of(PlanCategory::kParams), tracker.Usage(MemoryCategory::kParams).current);
    EXPECT_EQ(plan->bytes_of(PlanCategory::kMasterWeights), tracker.Usage(MemoryCategory::kMasterParams).current);
    EXPECT_EQ(plan->bytes_of(PlanCategory::kOptimizerState), tracker.Usage(MemoryCategory::kOptimizerState).current);
  }

  // dp 4 in shard groups of 2: the shards are the group's halves.
  EngineConfig hybrid = Config(3);
  hybrid.mutable_parallel()->set_dp(4);
  hybrid.mutable_zero()->set_shard_group_size(2);
  options = EngineOptionsFromConfig(streamed(hybrid));
  ASSERT_TRUE(options.ok()) << options.status();
  ASSERT_EQ(options->sharding.replicas, 2);
  absl::StatusOr<StepPlan> step = PlanStep(*model, *options, 2, 0);
  ASSERT_TRUE(step.ok()) << step.status();
  absl::StatusOr<MemoryPlan> plan = Plan(*options, *step, *model, kRows, 8);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->tier_of(PlanCategory::kGrads), OffloadTier::kNvme);
  EXPECT_EQ(plan->grad_pool_bytes, 2 * LargestBucketShards(*step));
  OffloadOptions resident_grads = options->offload;
  resident_grads.grads = OffloadTier::kDevice;
  const MemoryPlan resident = plan->WithOffload(resident_grads);
  // The f32 shards leave memory; the two buffers and the pool come in (at
  // these tiny shapes more than the shards: buffer_bytes is the floor).
  EXPECT_GT(resident.bytes_of(PlanCategory::kGrads), 0);
  EXPECT_EQ(resident.resident_bytes() - plan->resident_bytes(),
            resident.bytes_of(PlanCategory::kGrads) -
                (plan->bytes_of(PlanCategory::kOffloadStaging) - resident.bytes_of(PlanCategory::kOffloadStaging)));
}

// The staging the planner counts beside the pool when a class streams:
// OffloadStore's bounce buffer (one chunk's f32, allocated by the first
// state-view read of an offloaded kind, as a checkpoint save does) and the
// save's host copy of one unit's region (the largest, f32).
TEST(MemoryPlanTest, OffloadStagingIncludesTheBounceBufferAndACheckpointRegionCopy) {
  EngineConfig config = Config(2);
  const char* tmp = std::getenv("TEST_TMPDIR");
  config.mutable_offload()->set_nvme_dir(tmp != nullptr ? tmp : "/tmp");
  config.mutable_offload()->set_optimizer_state(NVME);
  config.mutable_offload()->set_master_weights(NVME);
  config.mutable_offload()->set_buffer_count(3);
  config.mutable_offload()->set_buffer_bytes(12 << 12);  // chunks of 4096 elements x 12 bytes
  auto comms = CreateThreadGroup(1);
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::CreateWithCommunicator(config, comms[0].get(), BuildGpt2(TinyGpt2()).value());
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::unique_ptr<Model> model = BuildGpt2(TinyGpt2()).value();
  absl::StatusOr<MemoryPlan> plan = Plan((*engine)->options(), (*engine)->plan(), *model, kRows, 8);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->staging_pool_bytes, 3 * (12 << 12));
  EXPECT_EQ(plan->bounce_bytes, 4096 * 4);
  int64_t largest = 0;
  for (int u = 0; u < (*engine)->num_units(); ++u) {
    if ((*engine)->trainable(u)) largest = std::max(largest, (*engine)->layout(u).shard_numel());
  }
  ASSERT_GT(largest, 0);
  EXPECT_EQ(plan->checkpoint_copy_bytes, largest * 4);
  EXPECT_EQ(plan->bytes_of(PlanCategory::kOffloadStaging), 3 * (12 << 12) + 4096 * 4 + largest * 4);
  // The bounce buffer is what the engine allocates: Create writes the
  // initial masters through it; a state-view read reuses it.
  const MemoryTracker& m = (*engine)->memory();
  EXPECT_EQ(m.Usage(MemoryCategory::kOffloadStaging).current, plan->staging_pool_bytes + plan->bounce_bytes);
  const auto& view = (*engine)->state();
  const int master = view.FindKind("master");
  ASSERT_GE(master, 0);
  std::vector<float> values(static_cast<size_t>((*engine)->layout(0).shard_numel()));
  ASSERT_TRUE(view.Read(0, master, 0, static_cast<int64_t>(values.size()), values.data()).ok());
  EXPECT_EQ(m.Usage(MemoryCategory::kOffloadStaging).current, plan->staging_pool_bytes + plan->bounce_bytes);
}

// engine.checkpoint.async_save: the snapshot holds the shard file's bytes
// (f32 master and each optimizer kind per unit with parameters), on the host,
// and the resident total grows by exactly that.
TEST(MemoryPlanTest, AsyncCheckpointSnapshotIsTheShardFilesBytesOnTheHost) {
  EngineConfig config = Config(2);
  config.mutable_checkpoint()->set_dir("/unused");
  config.mutable_checkpoint()->set_interval(1);
  auto comms = CreateThreadGroup(1);
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::CreateWithCommunicator(config, comms[0].get(), BuildGpt2(TinyGpt2()).value());
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::unique_ptr<Model> model = BuildGpt2(TinyGpt2()).value();
  EngineOptions without = (*engine)->options();
  without.checkpoint_snapshot = false;
  EngineOptions with = without;
  with.checkpoint_snapshot = true;
  absl::StatusOr<MemoryPlan> a = Plan(without, (*engine)->plan(), *model, kRows, 8);
  absl::StatusOr<MemoryPlan> b = Plan(with, (*engine)->plan(), *model, kRows, 8);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  int64_t shard_elements = 0;
  for (int u = 0; u < (*engine)->num_units(); ++u) {
    if ((*engine)->layout(u).numel() > 0) shard_elements += (*engine)->layout(u).shard_numel();
  }
  ASSERT_GT(shard_elements, 0);
  EXPECT_EQ(a->checkpoint_snapshot_bytes, 0);
  EXPECT_EQ(b->checkpoint_snapshot_bytes, shard_elements * 4 * 3);  // master, AdamW m and v
  EXPECT_EQ(b->Totals().host - a->Totals().host, b->checkpoint_snapshot_bytes);
  EXPECT_EQ(b->resident_bytes() - a->resident_bytes(), b->checkpoint_snapshot_bytes);
  EXPECT_TRUE(absl::StrContains(FormatMemoryPlan(*b, 0), "ckpt_snapshot")) << FormatMemoryPlan(*b, 0);
  EXPECT_FALSE(absl::StrContains(FormatMemoryPlan(*a, 0), "ckpt_snapshot"));
  // The config field sets it.
  config.mutable_checkpoint()->set_async_save(true);
  absl::StatusOr<EngineOptions> from_config = EngineOptionsFromConfig(config);
  ASSERT_TRUE(from_config.ok()) << from_config.status();
  EXPECT_TRUE(from_config->checkpoint_snapshot);
}

// buffer_count 2..64 as set; unset (0): half of what the limit leaves
// beside the rest of the plan, in slots, at most min(64, the chunks).
TEST(MemoryPlanTest, ChoosesBufferCountFromTheLimitAndTheChunks) {
  MemoryPlan p = RoundPlan();
  p.staging_pool_bytes = 0;
  const int64_t rest = p.resident_bytes();
  constexpr int64_t kSlot = int64_t{24} << 20;
  EXPECT_EQ(ChooseBufferCount(p, rest + 20 * kSlot, kSlot, 68), 10);
  EXPECT_EQ(ChooseBufferCount(p, rest + 21 * kSlot - 1, kSlot, 68), 10);
  EXPECT_EQ(ChooseBufferCount(p, rest + 200 * kSlot, kSlot, 68), 64);
  EXPECT_EQ(ChooseBufferCount(p, rest + 200 * kSlot, kSlot, 12), 12);
  EXPECT_EQ(ChooseBufferCount(p, rest + 2 * kSlot, kSlot, 68), 2);
  EXPECT_EQ(ChooseBufferCount(p, rest - 1, kSlot, 68), 2);
  EXPECT_EQ(ChooseBufferCount(p, rest + 200 * kSlot, kSlot, 1), 2);
}

// An engine whose config leaves buffer_count unset gets the planner's
// count: its program cycles through that many slots and its pool is that
// many buffers.
TEST(MemoryPlanTest, EngineWithBufferCountUnsetUsesThePlannersCount) {
  EngineConfig config = Config(2);
  const char* tmp = std::getenv("TEST_TMPDIR");
  config.mutable_offload()->set_nvme_dir(tmp != nullptr ? tmp : "/tmp");
  config.mutable_offload()->set_optimizer_state(NVME);
  config.mutable_offload()->set_master_weights(NVME);
  config.mutable_offload()->set_buffer_bytes(12 << 12);
  ASSERT_FALSE(config.offload().has_buffer_count());
  auto comms = CreateThreadGroup(1);
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::CreateWithCommunicator(config, comms[0].get(), BuildGpt2(TinyGpt2()).value());
  ASSERT_TRUE(engine.ok()) << engine.status();
  const int chunks = static_cast<int>((*engine)->train_program().chunks.size());
  ASSERT_GT(chunks, 2);
  // The tiny model's state is far below any host's memory: as many slots as
  // the program has chunks (at most 64).
  const int expected = std::min(64, chunks);
  EXPECT_EQ((*engine)->options().offload.buffer_count, expected);
  EXPECT_EQ((*engine)->train_program().offload_slots, expected);
  int most_slot = -1;
  for (const OffloadChunk& c : (*engine)->train_program().chunks) most_slot = std::max(most_slot, c.slot);
  EXPECT_EQ(most_slot, expected - 1);
  // The pool and the bounce buffer (one chunk of 4096 f32).
  EXPECT_EQ((*engine)->memory().Usage(MemoryCategory::kOffloadStaging).current,
            int64_t{expected} * (12 << 12) + 4096 * 4);
}

TEST(MemoryPlanTest, RamBackedFilesAreResident) {
  OffloadOptions nvme;
  nvme.optimizer_state = OffloadTier::kNvme;
  MemoryPlan p = RoundPlan().WithOffload(nvme);
  const int64_t G = int64_t{1} << 30;
  EXPECT_EQ(p.resident_bytes(), 4 * G + G / 2);
  EXPECT_EQ(p.nvme_bytes(), 4 * G);
  p.nvme_ram_backed = true;
  EXPECT_EQ(p.resident_bytes(), 8 * G + G / 2);
}

TEST(MemoryPlanTest, OffloadDirectoryMessages) {
  OffloadOptions nvme;
  nvme.optimizer_state = OffloadTier::kNvme;
  const MemoryPlan p = RoundPlan().WithOffload(nvme);
  FilesystemInfo fs;
  fs.type = "ext4";
  fs.available_bytes = int64_t{5} << 30;
  EXPECT_EQ(CheckOffloadDirectory(p, "/nvme", fs, 1).message(),
            "offload directory /nvme is not writable; the plan puts 4294967296 bytes (4.3 GB) of offload files there");
  fs.writable = true;
  EXPECT_TRUE(CheckOffloadDirectory(p, "/nvme", fs, 1).ok());
  absl::Status s = CheckOffloadDirectory(p, "/nvme", fs, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "offload directory /nvme has 5368709120 bytes available (5.4 GB), the plan needs 8589934592 bytes (8.6 GB, "
            "4294967296 for each of 2 ranks on this host)");
}

TEST(MemoryPlanTest, LimitResolution) {
  EngineOptions o;
  const std::string meminfo = "MemTotal: 100 kB\nMemAvailable:    8388608 kB\n";
  EXPECT_EQ(ResolveMemoryLimitFrom(o, 2, "max\n", meminfo).value(), int64_t{4} << 30);
  EXPECT_EQ(ResolveMemoryLimitFrom(o, 2, "2147483648\n", meminfo).value(), int64_t{1} << 30);
  EXPECT_EQ(ResolveMemoryLimitFrom(o, 1, "", meminfo).value(), int64_t{8} << 30);
  EXPECT_EQ(ResolveMemoryLimitFrom(o, 1, "", "").status().code(), absl::StatusCode::kFailedPrecondition);
  o.memory_limit_bytes = 123 << 20;
  EXPECT_EQ(ResolveMemoryLimitFrom(o, 4, "max", meminfo).value(), 123 << 20);
  EXPECT_GT(ResolveMemoryLimit(EngineOptions(), 1).value(), 0);
  EXPECT_GT(MeasuredPeakRss(), 0);
}

// The run's measured peak may pass the limit by 10 % (the plan's margin
// for what no tracker sees), not more; no limit, no check.
TEST(MemoryPlanTest, MeasuredPeakRssOverTheLimitByMoreThanTenPercent) {
  const int64_t limit = int64_t{8} << 30;
  EXPECT_TRUE(CheckMeasuredPeakRss(2, limit, limit, true).ok());
  EXPECT_TRUE(CheckMeasuredPeakRss(2, 9448928051, limit, true).ok());  // 1.1 x limit, rounded down
  const absl::Status over = CheckMeasuredPeakRss(2, 9448928052, limit, true);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(over.message(),
            "rank 2: measured peak RSS 9448928052 bytes (8.80 GiB) exceeds engine.memory_limit_mib 8589934592 bytes "
            "(8.00 GiB) by more than 10 %; expected at most 9448928051 bytes");
  EXPECT_EQ(CheckMeasuredPeakRss(0, int64_t{10} << 30, limit, false).message(),
            "rank 0: measured peak RSS 10737418240 bytes (10.00 GiB) exceeds the host's limit (engine.memory_limit_mib "
            "0) 8589934592 bytes (8.00 GiB) by more than 10 %; expected at most 9448928051 bytes");
  EXPECT_TRUE(CheckMeasuredPeakRss(0, int64_t{10} << 30, 0, false).ok());
}

TEST(MemoryPlanTest, RanksOnHostFromTheLauncher) {
  unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  unsetenv("SLURM_NTASKS_PER_NODE");
  EXPECT_EQ(RanksOnHost(), 1);
  EXPECT_EQ(RanksOnHost(3), 3);
  setenv("SLURM_NTASKS_PER_NODE", "4(x2)", 1);
  EXPECT_EQ(RanksOnHost(), 4);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  EXPECT_EQ(RanksOnHost(), 2);
  unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  unsetenv("SLURM_NTASKS_PER_NODE");
}

}  // namespace
}  // namespace zeroshard
