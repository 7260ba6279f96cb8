// The memory planner (docs/offload.md, "The memory planner"): what one rank
// will hold during a step, per category and per tier, computed from what is
// known before anything is allocated — the options, the step plan, the
// model's units, the rank's coordinates and the micro-batch shape — and
// checked against the rank's memory limit. A pure function: check-config
// prints the plan of every rank, and Engine::Create refuses a plan over the
// limit before its first large allocation.
//
// The model state (params, master_weights, grads, optimizer_state) is
// exactly what UnitShard and ShardedOptimizer allocate at rest, so it equals
// the MemoryTracker's bytes after Engine::Create. The step's transients are
// estimates: activations from the units' estimates at the checkpointing
// policy and the program's most kept (micro-batch, unit) pairs, gathered
// units at the program's most gathered at once, the gradient buffers live
// between backward and reduction, the reducer's staging slots, the offload
// staging pool, and an untracked-runtime allowance.
#ifndef ZEROSHARD_ENGINE_MEMORY_PLAN_H_
#define ZEROSHARD_ENGINE_MEMORY_PLAN_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/engine_options.h"
#include "engine/step_plan.h"
#include "nn/model.h"
#include "offload/async_io.h"

namespace zeroshard {

enum class PlanCategory : uint8_t {
  kParams,          // compute-dtype parameters at rest (full, or stage 3's shard)
  kMasterWeights,   // the f32 master (the rank's shard under ZeRO 1-3)
  kGrads,           // gradients at rest (full compute dtype at 0-1, f32 shards at 2-3)
  kOptimizerState,  // the optimizer's state kinds over the master region
  kStepGrads,       // during a step: stage 0-1 f32 shards, stage 2-3 full buffers until reduced
  kGatheredUnits,   // stage 3: full parameter buffers gathered at once
  kActivations,     // saved for backward, at the policy and the in-flight micro-batches
  kCommBuffers,     // the gradient reducer's staging slots
  kOffloadStaging,  // buffer_count x buffer_bytes when any class is NVME
  kUntracked,       // runtime the tracker does not see (see kUntrackedBaseBytes)
};
inline constexpr int kNumPlanCategories = 10;

// "params", "master_weights", "grads", "optimizer_state", "step_grads",
// "gathered_units", "activations", "comm_buffers", "offload_staging",
// "untracked".
const char* PlanCategoryName(PlanCategory category);

// The untracked runtime: the process's code, the allocator's and MPI's
// arenas, protobuf and the kernels' thread stacks (measured at about 96 MiB
// of VmRSS for a one-rank CPU engine before its first allocation), plus per
// kernel thread one BLAS packing buffer (OpenBLAS's per-thread GEMM buffer,
// 32 MiB by default).
inline constexpr int64_t kUntrackedBaseBytes = int64_t{96} << 20;
inline constexpr int64_t kUntrackedBytesPerThread = int64_t{32} << 20;

struct TierBytes {
  int64_t device = 0;
  int64_t host = 0;
  int64_t nvme = 0;
  int64_t total() const { return device + host + nvme; }
};

struct MemoryPlanInputs {
  EngineOptions options;
  const StepPlan* plan = nullptr;  // this rank's (its pipeline stage's)
  const Model* model = nullptr;
  int rank = 0;  // world rank, for messages
  // The rank's coordinates: the layouts are laid out for the shard group.
  int dp_rank = 0;
  int dp_size = 1;
  int tp_rank = 0;
  int tp_size = 1;
  int pp_stage = 0;
  // The micro-batch's shape: rows and tokens per row (1 for models without
  // a sequence). batch <= 0: not known (Engine::Create, before the first
  // step): activations are counted 0 with a note.
  int64_t micro_batch = 0;
  int64_t sequence_length = 1;
  // The kernels' CPU threads (the untracked estimate's BLAS buffers).
  int cpu_threads = 1;
  // The filesystem under options.offload.nvme_dir (only read when a class
  // is NVME): a RAM-backed one counts the NVMe bytes as resident.
  FilesystemInfo nvme_filesystem;
};

struct MemoryPlan {
  int rank = 0;
  int pp_stage = 0;
  // Per category: its bytes wherever they live, and where that is (classes
  // that cannot be offloaded are kDevice; staging and untracked are host).
  std::array<int64_t, kNumPlanCategories> bytes{};
  std::array<OffloadTier, kNumPlanCategories> tier{};
  // The offloadable classes' file bytes: each region (unit, state kind)
  // rounded up with AlignIo, whatever the class's tier.
  std::array<int64_t, kNumPlanCategories> file_bytes{};
  // Of the gradients' bytes, those that stay on the device whatever their
  // tier: a tied mirror's f32 shard (no optimizer region streams it).
  int64_t resident_grad_bytes = 0;
  // The staging pool when the master, the gradients or the optimizer state
  // are NVME (buffer_count x buffer_bytes).
  int64_t staging_pool_bytes = 0;
  // The param slots when params are NVME (stage 3): ParamShardSlots x the
  // largest shard in the compute dtype, rounded up with AlignIo.
  int64_t param_pool_bytes = 0;
  // On a GPU: host offload's pinned gradient and parameter staging
  // (engine/host_offload.h), counted when optimizer_state and master_weights
  // are both HOST.
  int64_t host_offload_staging_bytes = 0;
  bool device_is_gpu = false;
  // The two grad staging buffers when grads are NVME (stages 2-3):
  // 2 x GradStagingBytes (engine/step_plan.h).
  int64_t grad_pool_bytes = 0;
  // When the master, the gradients or the optimizer state are NVME:
  // OffloadStore's bounce buffer (one chunk's f32, taken by the state view's
  // Read/Write of an offloaded kind: checkpoints, evaluation tools) and a
  // checkpoint's host copy of one unit's region of an offloaded kind (the
  // largest region, f32), both with the staging pool.
  int64_t bounce_bytes = 0;
  int64_t checkpoint_copy_bytes = 0;
  // engine.checkpoint.async_save: the host snapshot an asynchronous save
  // holds, every byte the rank's shard file stores (f32 master and each
  // optimizer kind of the units its stage computes, frozen ones as zeros).
  // Host memory, counted in Totals() and so in resident_bytes().
  int64_t checkpoint_snapshot_bytes = 0;
  bool nvme_ram_backed = false;
  bool params_offloadable = false;  // stage 3
  // Stages 2-3 (an f32 gradient shard at rest): what
  // engine.offload.grads: NVME needs.
  bool grads_offloadable = false;
  // Lines the plan prints under its table ("activations: unknown (not
  // estimated by the model)").
  std::vector<std::string> notes;

  TierBytes ByTier(PlanCategory category) const;
  TierBytes Totals() const;
  // Everything not on NVMe, plus the NVMe files when their filesystem is
  // RAM-backed.
  int64_t resident_bytes() const;
  // The files in nvme_dir: the NVME classes' file_bytes.
  int64_t nvme_bytes() const;
  OffloadTier tier_of(PlanCategory category) const { return tier[static_cast<int>(category)]; }
  int64_t bytes_of(PlanCategory category) const { return bytes[static_cast<int>(category)]; }

  // This plan with the given tiers for the offloadable classes (staging
  // appears or goes with them).
  MemoryPlan WithOffload(const OffloadOptions& offload) const;
  // Every offloadable class on NVME: the least resident memory offload can
  // reach.
  MemoryPlan Floor() const;
};

absl::StatusOr<MemoryPlan> PlanMemory(const MemoryPlanInputs& inputs);

// engine.offload.buffer_count left unset (0): the staging slots of
// buffer_bytes that fit in half of what `limit_bytes` leaves beside the
// rest of `plan` (its staging pool left out), at least 2 and at most
// min(64, chunks): the program never uses more slots than it has chunks.
// 2 when nothing is left (CheckMemoryPlan then refuses as for a set count).
int ChooseBufferCount(const MemoryPlan& plan, int64_t limit_bytes, int64_t buffer_bytes, int chunks);

// PlanMemory of inputs.plan, which PlanStep(*inputs.model, inputs.options,
// dp_size, stage) built. When inputs.options.offload.buffer_count is 0 and
// that program streams chunks, the count is chosen (ChooseBufferCount
// against limit_bytes), written to options->offload.buffer_count, the step
// replanned into *step_plan with it (the chunks do not depend on it), and
// the memory planned again. `options` and `step_plan` are what inputs
// names.
absl::StatusOr<MemoryPlan> PlanMemoryChoosingBufferCount(MemoryPlanInputs inputs, int64_t limit_bytes, int dp_size,
                                                         int stage, EngineOptions* options, StepPlan* step_plan);

// OK when plan.resident_bytes() <= limit_bytes. Otherwise kResourceExhausted:
//   memory plan exceeds the limit: rank R needs X GiB resident, limit Y GiB;
//   largest: a X GiB, b Y GiB, c Z GiB; set engine.offload.optimizer_state:
//   NVME (needs X GiB resident, Y GB in nvme_dir)
// suggesting the first of (optimizer_state NVME; + master_weights NVME;
// + params NVME, stage 3) that fits; none fits: "no offload setting this
// engine supports fits".
// A limit below the floor (Floor()): "memory plan exceeds the limit: the
// limit is below the plan's floor (every state class offloaded: X GiB);
// rank R needs ...".
absl::Status CheckMemoryPlan(const MemoryPlan& plan, int64_t limit_bytes);

// When a class is NVME: kFailedPrecondition "offload directory D is not
// writable (...)" and kResourceExhausted "offload directory D has A bytes
// available, the plan needs N bytes (...)" for `ranks_on_host` ranks' files.
absl::Status CheckOffloadDirectory(const MemoryPlan& plan, const std::string& dir, const FilesystemInfo& fs,
                                   int ranks_on_host);

// Ranks of this job on this host, from the launcher's environment
// (core/local_ranks.h), else `fallback` (at least 1).
int RanksOnHost(int fallback = 1);

// The limit each rank is planned against: options.memory_limit_bytes when
// > 0; else min(the cgroup v2 memory.max of /proc/self/cgroup's group,
// unless "max", MemAvailable of /proc/meminfo) / ranks_on_host.
// kFailedPrecondition when neither can be read.
absl::StatusOr<int64_t> ResolveMemoryLimit(const EngineOptions& options, int ranks_on_host);
// The same from given file contents (tests): `cgroup_max` is memory.max's
// text ("" when unreadable), `meminfo` /proc/meminfo's.
absl::StatusOr<int64_t> ResolveMemoryLimitFrom(const EngineOptions& options, int ranks_on_host,
                                               const std::string& cgroup_max, const std::string& meminfo);

// VmHWM of /proc/self/status in bytes (0 when unreadable).
int64_t MeasuredPeakRss();

// A run's measured peak against its limit: kResourceExhausted "rank R:
// measured peak RSS X bytes (A GiB) exceeds engine.memory_limit_mib L bytes
// (B GiB) by more than 10 %; expected at most M bytes" when
// measured_bytes > 1.1 x limit_bytes ("the host's limit
// (engine.memory_limit_mib 0)" for a resolved one); OK when limit_bytes <= 0.
absl::Status CheckMeasuredPeakRss(int rank, int64_t measured_bytes, int64_t limit_bytes, bool limit_configured);

// A table: one row per category with bytes, its device / host / nvme split,
// then the resident peak, the NVMe bytes and the limit (limit <= 0: not
// printed), then the notes.
std::string FormatMemoryPlan(const MemoryPlan& plan, int64_t limit_bytes);

// "1.5 GiB" (two decimals below 10).
std::string FormatGiB(int64_t bytes);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_MEMORY_PLAN_H_
