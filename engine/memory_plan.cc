#include "engine/memory_plan.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/dtype.h"
#include "core/local_ranks.h"
#include "core/status_macros.h"
#include "engine/optimizer_program.h"
#include "sharding/optimizer_registry.h"
#include "sharding/quantized_shard.h"

namespace zeroshard {
namespace {

constexpr int Idx(PlanCategory c) { return static_cast<int>(c); }

int64_t Size(DType d) { return static_cast<int64_t>(DTypeSize(d)); }

// The tiers' names as the config spells them.
const char* TierName(OffloadTier t) {
  switch (t) {
    case OffloadTier::kHost:
      return "HOST";
    case OffloadTier::kNvme:
      return "NVME";
    default:
      return "DEVICE";
  }
}

// A class the optimizer's staging pool streams (the parameter shards have
// their own pool).
bool AnyNvme(const MemoryPlan& p) {
  for (PlanCategory c : {PlanCategory::kMasterWeights, PlanCategory::kGrads,
                         PlanCategory::kOptimizerState}) {
    if (p.tier_of(c) == OffloadTier::kNvme && p.bytes_of(c) > 0) return true;
  }
  return false;
}

// Kept activation bytes over the program: FORWARD of a unit that runs
// backward keeps its saved tensors (a checkpointed unit only its input, a
// selective one its selective estimate, already in `saved`),
// RECOMPUTE rebuilds them, its backward (BACKWARD or BACKWARD_WEIGHT)
// frees both; one unit output is alive beside them at any time.
int64_t PeakActivations(const StepPlan& plan, const std::vector<int64_t>& saved, const std::vector<int64_t>& output) {
  const int L = static_cast<int>(plan.units.size());
  std::map<std::pair<int, int>, int64_t> kept;  // (mb, unit) -> bytes
  int64_t now = 0, peak = 0, largest_output = 0;
  for (int u = 0; u < L; ++u) largest_output = std::max(largest_output, output[u]);
  bool split = false;
  for (const Action& a : plan.train.actions) split |= a.kind == ActionKind::kBackwardWeight;
  for (const Action& a : plan.train.actions) {
    if (a.unit < 0 || a.unit >= L) continue;
    const std::pair<int, int> key{a.micro_batch, a.unit};
    const UnitPlan& up = plan.units[a.unit];
    int64_t add = 0;
    if (a.kind == ActionKind::kForward && up.backward) {
      add = up.checkpointed ? (a.unit > 0 ? output[a.unit - 1] : 0) : saved[a.unit];
    } else if (a.kind == ActionKind::kRecompute) {
      add = saved[a.unit];
    } else if (a.kind == ActionKind::kBackward || (split && a.kind == ActionKind::kBackwardWeight)) {
      now -= kept[key];
      kept.erase(key);
      continue;
    } else {
      continue;
    }
    kept[key] += add;
    now += add;
    peak = std::max(peak, now);
  }
  return peak + largest_output;
}

// Stage 3: the most full parameter buffers gathered (or in flight) at once.
int64_t PeakGathered(const StepPlan& plan, DType compute) {
  const int L = static_cast<int>(plan.layouts.size());
  std::vector<bool> gathered(L, false);
  int64_t now = 0, peak = 0;
  for (const Action& a : plan.train.actions) {
    if (a.unit < 0 || a.unit >= L) continue;
    const int64_t bytes = plan.layouts[a.unit].padded_numel() * Size(compute);
    if (a.kind == ActionKind::kGather && !gathered[a.unit]) {
      gathered[a.unit] = true;
      now += bytes;
      peak = std::max(peak, now);
    } else if (a.kind == ActionKind::kRelease && gathered[a.unit]) {
      gathered[a.unit] = false;
      now -= bytes;
    }
  }
  return peak;
}

// The reducer's staging slots (sharding/grad_reducer.cc): per slot the
// largest output shard, and the input when a bucket stages it (fused,
// another dtype, or int8); with int8 replicas the R packed shards and, when
// the reduce dtype is not f32, their f32 sum.
int64_t StagingBytes(const StepPlan& plan, const EngineOptions& o, int dp_size) {
  const bool quantized = o.sharding.quantize_gradients;
  const int64_t rs = quantized ? 1 : Size(o.reduce_dtype);
  int slots = 0;
  for (int s : plan.staging_slots) slots = std::max(slots, s + 1);
  std::vector<int64_t> out(slots, 0), in(slots, 0), sum(slots, 0), replica(slots, 0), replica_sum(slots, 0);
  const bool quantized_replicas = o.sharding.quantize_replicas && o.sharding.replicas > 1;
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const int s = b < plan.staging_slots.size() ? plan.staging_slots[b] : -1;
    if (s < 0) continue;
    const GradBucket& g = plan.buckets[b];
    const bool stages_input = g.units.size() > 1 || o.reduce_dtype != o.compute_dtype || quantized;
    out[s] = std::max(out[s], g.shard_numel * rs * (quantized ? dp_size : 1));
    if (stages_input) in[s] = std::max(in[s], g.shard_numel * rs * dp_size);
    if (quantized) sum[s] = std::max(sum[s], g.shard_numel * 4);
    if (quantized_replicas) {
      std::vector<const FlatParamLayout*> layouts;
      for (int u : g.units) layouts.push_back(&plan.layouts[u]);
      replica[s] = std::max(replica[s], MaxPackedBucketPartBytes(layouts, o.sharding.quantization_block) *
                                            o.sharding.replicas);
      if (o.reduce_dtype != DType::kF32) replica_sum[s] = std::max(replica_sum[s], g.shard_numel * 4);
    }
  }
  int64_t total = 0;
  for (int s = 0; s < slots; ++s) total += out[s] + in[s] + sum[s] + replica[s] + replica_sum[s];
  return total;
}

// Gradient buffers a step adds to the state at rest: stages 0-1 the f32
// shards of every trainable unit; stages 2-3 the full buffers from a unit's
// backward to its bucket's reduction (two buckets at once: one filling,
// one reducing), or all of them when reductions are deferred.
int64_t StepGradBytes(const StepPlan& plan, const EngineOptions& o) {
  const int L = static_cast<int>(plan.layouts.size());
  auto trains = [&](int u) { return plan.units[u].has_grads(); };
  int64_t total = 0;
  if (!o.zero.shards_grads()) {
    for (int u = 0; u < L; ++u) {
      if (trains(u)) total += plan.layouts[u].shard_numel() * 4;
    }
    return total;
  }
  const int64_t c = Size(o.compute_dtype);
  if (o.reduce_mode == ReduceMode::kDefer) {
    for (int u = 0; u < L; ++u) {
      if (trains(u)) total += plan.layouts[u].padded_numel() * c;
    }
    return total;
  }
  std::vector<int64_t> bucket_bytes;
  for (const GradBucket& g : plan.buckets) {
    int64_t b = 0;
    for (int u : g.units) b += plan.layouts[u].padded_numel() * c;
    bucket_bytes.push_back(b);
  }
  std::sort(bucket_bytes.rbegin(), bucket_bytes.rend());
  for (size_t i = 0; i < bucket_bytes.size() && i < 2; ++i) total += bucket_bytes[i];
  return total;
}

// Decimal gigabytes for the files (what df prints).
std::string DiskGB(int64_t b) { return absl::StrFormat("%.1f GB", static_cast<double>(b) / 1e9); }

}  // namespace

const char* PlanCategoryName(PlanCategory category) {
  switch (category) {
    case PlanCategory::kParams:
      return "params";
    case PlanCategory::kMasterWeights:
      return "master_weights";
    case PlanCategory::kGrads:
      return "grads";
    case PlanCategory::kOptimizerState:
      return "optimizer_state";
    case PlanCategory::kStepGrads:
      return "step_grads";
    case PlanCategory::kGatheredUnits:
      return "gathered_units";
    case PlanCategory::kActivations:
      return "activations";
    case PlanCategory::kCommBuffers:
      return "comm_buffers";
    case PlanCategory::kOffloadStaging:
      return "offload_staging";
    case PlanCategory::kUntracked:
      return "untracked";
  }
  return "?";
}

std::string FormatGiB(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (int64_t{1} << 30)) return absl::StrFormat("%.2f GiB", b / (1 << 30));
  if (bytes >= (int64_t{1} << 20)) return absl::StrFormat("%.2f MiB", b / (1 << 20));
  if (bytes >= 1024) return absl::StrFormat("%.2f KiB", b / 1024);
  return absl::StrCat(bytes, " B");
}

TierBytes MemoryPlan::ByTier(PlanCategory category) const {
  TierBytes t;
  const int64_t b = bytes[Idx(category)];
  const int64_t pinned = category == PlanCategory::kGrads ? resident_grad_bytes : 0;
  switch (tier[Idx(category)]) {
    case OffloadTier::kNvme:
      t.nvme = b - pinned;
      t.device = pinned;
      break;
    case OffloadTier::kHost:
      t.host = b - pinned;
      t.device = pinned;
      break;
    case OffloadTier::kDevice:
      t.device = b;
      break;
  }
  return t;
}

TierBytes MemoryPlan::Totals() const {
  TierBytes t;
  for (int c = 0; c < kNumPlanCategories; ++c) {
    const TierBytes b = ByTier(static_cast<PlanCategory>(c));
    t.device += b.device;
    t.host += b.host;
    t.nvme += b.nvme;
  }
  t.host += checkpoint_snapshot_bytes;
  return t;
}

int64_t MemoryPlan::nvme_bytes() const {
  int64_t n = 0;
  for (int c = 0; c < kNumPlanCategories; ++c) {
    if (tier[c] == OffloadTier::kNvme) n += file_bytes[c];
  }
  return n;
}

int64_t MemoryPlan::resident_bytes() const {
  const TierBytes t = Totals();
  return t.device + t.host + (nvme_ram_backed ? nvme_bytes() : 0);
}

MemoryPlan MemoryPlan::WithOffload(const OffloadOptions& offload) const {
  MemoryPlan p = *this;
  p.tier[Idx(PlanCategory::kOptimizerState)] = offload.optimizer_state;
  p.tier[Idx(PlanCategory::kMasterWeights)] = offload.master_weights;
  p.tier[Idx(PlanCategory::kParams)] = params_offloadable ? offload.params : OffloadTier::kDevice;
  p.tier[Idx(PlanCategory::kGrads)] =
      file_bytes[Idx(PlanCategory::kGrads)] > 0 && (offload.grads != OffloadTier::kNvme || grads_offloadable)
          ? offload.grads
          : OffloadTier::kDevice;
  p.bytes[Idx(PlanCategory::kOffloadStaging)] =
      (AnyNvme(p) ? staging_pool_bytes + bounce_bytes + checkpoint_copy_bytes : 0) +
      (p.tier_of(PlanCategory::kParams) == OffloadTier::kNvme ? param_pool_bytes : 0) +
      (p.tier_of(PlanCategory::kGrads) == OffloadTier::kNvme ? grad_pool_bytes : 0);
  if (device_is_gpu && offload.optimizer_state == OffloadTier::kHost && offload.master_weights == OffloadTier::kHost) {
    p.bytes[Idx(PlanCategory::kOffloadStaging)] += host_offload_staging_bytes;
  }
  return p;
}

MemoryPlan MemoryPlan::Floor() const {
  OffloadOptions all;
  all.optimizer_state = all.master_weights = all.params = all.grads = OffloadTier::kNvme;
  return WithOffload(all);
}

absl::StatusOr<MemoryPlan> PlanMemory(const MemoryPlanInputs& in) {
  if (in.plan == nullptr || in.model == nullptr) return absl::InvalidArgumentError("PlanMemory needs a plan and a model");
  const StepPlan& plan = *in.plan;
  const EngineOptions& o = in.options;
  const int L = static_cast<int>(plan.layouts.size());
  if (static_cast<int>(in.model->units.size()) != L || static_cast<int>(plan.units.size()) != L) {
    return absl::InvalidArgumentError(absl::StrCat("PlanMemory: the model has ", in.model->units.size(),
                                                   " units, the step plan ", L));
  }
  absl::StatusOr<const Optimizer*> optimizer = FindOptimizer(o.optimizer.name);
  if (!optimizer.ok()) return optimizer.status();
  const std::vector<OptimizerStateKind> kinds = (*optimizer)->StateKinds(o.optimizer);

  MemoryPlan p;
  p.rank = in.rank;
  p.pp_stage = in.pp_stage;
  p.params_offloadable = o.zero.shards_params();
  // Under a pipeline and hybrid sharding too: the same two grad staging
  // buffers serve (a tied unit's TIED_REDUCE takes one; a bucket waiting for
  // its replica all-reduce holds one until the next bucket's wait).
  p.grads_offloadable = o.zero.shards_grads();
  const int64_t c = Size(o.compute_dtype);
  int64_t* bytes = p.bytes.data();
  int64_t* files = p.file_bytes.data();
  // The state at rest, exactly as UnitShard::Create and ShardedOptimizer
  // allocate it (sharding/unit_shard.h's table).
  for (int u = 0; u < L; ++u) {
    const UnitPlan& up = plan.units[u];
    if (!up.held) continue;
    const int64_t P = plan.layouts[u].padded_numel();
    const int64_t S = plan.layouts[u].shard_numel();
    const int64_t params = (o.zero.shards_params() ? S : P) * c;
    const int64_t master = (o.zero.shards_master() ? S : P) * 4;
    bytes[Idx(PlanCategory::kParams)] += params;
    files[Idx(PlanCategory::kParams)] += p.params_offloadable ? AlignIo(params) : 0;
    // A tied mirror keeps no master (the owning stage does).
    if (up.keeps_master()) {
      bytes[Idx(PlanCategory::kMasterWeights)] += master;
      files[Idx(PlanCategory::kMasterWeights)] += AlignIo(master);
    }
    if (up.trainable) {
      if (!o.zero.shards_grads()) {
        bytes[Idx(PlanCategory::kGrads)] += P * c;
      } else {
        bytes[Idx(PlanCategory::kGrads)] += S * 4;
        // A mirror's shard stays resident (it has no optimizer region).
        if (up.mirror) {
          p.resident_grad_bytes += S * 4;
        } else {
          files[Idx(PlanCategory::kGrads)] += AlignIo(S * 4);
        }
      }
      // Error feedback's residuals (f32, the padded buffer) are gradients too.
      if (o.sharding.error_feedback && P > 0) bytes[Idx(PlanCategory::kGrads)] += P * 4;
    }
    if (up.optimized()) {
      const int64_t region = o.zero.shards_master() ? S : P;
      // As HostOffload allocates it: the f32 gradient, the rounded
      // parameters unless the compute dtype is f32.
      p.host_offload_staging_bytes += region * 4 + (o.compute_dtype == DType::kF32 ? 0 : region * c);
      for (const OptimizerStateKind& k : kinds) {
        bytes[Idx(PlanCategory::kOptimizerState)] += region * Size(k.dtype);
        files[Idx(PlanCategory::kOptimizerState)] += AlignIo(region * Size(k.dtype));
      }
    }
  }
  if (o.checkpoint_snapshot) {
    // As the shard file stores it: the checkpoint's dp-wide shard (a
    // 1/replicas part of the shard-group shard) per kind, f32.
    const int64_t replicas = std::max(1, o.sharding.replicas);
    for (int u = 0; u < L; ++u) {
      if (!plan.units[u].computed || plan.layouts[u].numel() == 0) continue;
      p.checkpoint_snapshot_bytes +=
          (plan.layouts[u].shard_numel() / replicas) * 4 * (1 + static_cast<int64_t>(kinds.size()));
    }
  }
  bytes[Idx(PlanCategory::kStepGrads)] = StepGradBytes(plan, o);
  if (o.zero.gathers_params()) bytes[Idx(PlanCategory::kGatheredUnits)] = PeakGathered(plan, o.compute_dtype);
  bytes[Idx(PlanCategory::kCommBuffers)] = StagingBytes(plan, o, in.dp_size);

  // Activations from the units' estimates.
  if (in.micro_batch <= 0) {
    p.notes.push_back("activations: not counted (the micro-batch shape is known at the first step)");
  } else {
    std::vector<int64_t> saved(L, 0), output(L, 0);
    std::vector<std::string> unknown;
    for (int u = 0; u < L; ++u) {
      if (!plan.units[u].computed) continue;
      const Unit& unit = *in.model->units[u];
      saved[u] = plan.units[u].selective
                     ? unit.EstimateSelectiveSavedActivationBytes(in.micro_batch, in.sequence_length, o.compute_dtype)
                     : unit.EstimateSavedActivationBytes(in.micro_batch, in.sequence_length, o.compute_dtype);
      output[u] = unit.EstimateOutputActivationBytes(in.micro_batch, in.sequence_length, o.compute_dtype);
      if (saved[u] < 0 || output[u] < 0) {
        unknown.push_back(unit.name());
        saved[u] = output[u] = 0;
      }
    }
    if (!unknown.empty()) {
      p.notes.push_back("activations: unknown (not estimated by the model)");
    } else {
      bytes[Idx(PlanCategory::kActivations)] = PeakActivations(plan, saved, output);
      if (in.tp_size > 1) p.notes.push_back("activations: estimated as at tp 1 (an upper bound)");
      std::vector<std::string> selective;
      for (int u = 0; u < L; ++u) {
        if (plan.units[u].selective && plan.units[u].computed) selective.push_back(in.model->units[u]->name());
      }
      if (!selective.empty()) {
        p.notes.push_back(absl::StrCat("activations: checkpointed selectively (GEMM outputs kept, the rest recomputed "
                                       "in backward): ",
                                       absl::StrJoin(selective, ", ")));
      }
    }
  }

  // Unset (0): at the least count until PlanMemoryChoosingBufferCount
  // chooses one (what a floor or a refusal's suggestion needs at least).
  p.staging_pool_bytes = int64_t{o.offload.buffer_count == 0 ? 2 : o.offload.buffer_count} * o.offload.buffer_bytes;
  {
    // The bounce buffer is one chunk's f32; where nothing streams yet, the
    // chunk of master and optimizer state streamed (the first classes a
    // refusal suggests).
    const int64_t streamed = StreamedBytesPerElement(o);
    const int64_t bytes_per_element = streamed > 0 ? streamed : 4 * (1 + static_cast<int64_t>(kinds.size()));
    p.bounce_bytes = AlignIo(StreamChunkElements(o.offload.buffer_bytes, bytes_per_element) * 4);
    int64_t largest_region = 0;
    for (int u = 0; u < L; ++u) {
      if (!plan.units[u].optimized()) continue;
      largest_region = std::max(largest_region, o.zero.shards_master() ? plan.layouts[u].shard_numel()
                                                                       : plan.layouts[u].padded_numel());
    }
    p.checkpoint_copy_bytes = largest_region * 4;
  }
  if (p.params_offloadable) {
    EngineOptions nvme = o;
    nvme.offload.params = OffloadTier::kNvme;
    int64_t slot = kIoAlignment;
    for (int64_t b : StreamedParamShardBytes(plan, nvme)) slot = std::max(slot, AlignIo(b));
    p.param_pool_bytes = int64_t{ParamShardSlots(plan, o)} * slot;
  }
  p.device_is_gpu = o.device != Device::kCpu;
  if (p.grads_offloadable) {
    EngineOptions nvme = o;
    nvme.offload.grads = OffloadTier::kNvme;
    p.grad_pool_bytes = 2 * GradStagingBytes(plan, nvme);
  }
  bytes[Idx(PlanCategory::kUntracked)] = kUntrackedBaseBytes + int64_t{std::max(1, in.cpu_threads)} * kUntrackedBytesPerThread;
  for (int k = 0; k < kNumPlanCategories; ++k) p.tier[k] = OffloadTier::kDevice;
  p.tier[Idx(PlanCategory::kOffloadStaging)] = OffloadTier::kHost;
  p.tier[Idx(PlanCategory::kUntracked)] = OffloadTier::kHost;
  p.nvme_ram_backed = o.offload.any_nvme() && in.nvme_filesystem.ram_backed;
  if (p.nvme_ram_backed) {
    p.notes.push_back(absl::StrCat("nvme_dir is on ", in.nvme_filesystem.type,
                                   " (RAM-backed): its files count as resident memory"));
  }
  MemoryPlan out = p.WithOffload(o.offload);
  if (o.device == Device::kCpu &&
      (o.offload.optimizer_state == OffloadTier::kHost || o.offload.master_weights == OffloadTier::kHost ||
       o.offload.params == OffloadTier::kHost || o.offload.grads == OffloadTier::kHost)) {
    out.notes.push_back("HOST on a CPU device is the same memory: it frees nothing");
  }
  return out;
}

int ChooseBufferCount(const MemoryPlan& plan, int64_t limit_bytes, int64_t buffer_bytes, int chunks) {
  constexpr int kMin = 2, kMax = 64;  // the validator's range
  const int most = std::max(kMin, std::min(kMax, chunks));
  const int64_t left = limit_bytes - (plan.resident_bytes() - (AnyNvme(plan) ? plan.staging_pool_bytes : 0));
  if (buffer_bytes <= 0 || left <= 0) return kMin;
  return static_cast<int>(std::clamp<int64_t>(left / 2 / buffer_bytes, kMin, most));
}

absl::StatusOr<MemoryPlan> PlanMemoryChoosingBufferCount(MemoryPlanInputs in, int64_t limit_bytes, int dp_size,
                                                         int stage, EngineOptions* options, StepPlan* step_plan) {
  ASSIGN_OR_RETURN(MemoryPlan plan, PlanMemory(in));
  const int chunks = static_cast<int>(step_plan->train.chunks.size());
  if (in.options.offload.buffer_count != 0 || chunks == 0) return plan;
  const int count = ChooseBufferCount(plan, limit_bytes, in.options.offload.buffer_bytes, chunks);
  options->offload.buffer_count = count;
  in.options.offload.buffer_count = count;
  ASSIGN_OR_RETURN(*step_plan, PlanStep(*in.model, *options, dp_size, stage));
  in.plan = step_plan;
  ASSIGN_OR_RETURN(plan, PlanMemory(in));
  plan.notes.push_back(absl::StrCat("engine.offload.buffer_count: ", count, " chosen (of at most ", std::min(64, chunks),
                                    " the program uses)"));
  return plan;
}

absl::Status CheckMemoryPlan(const MemoryPlan& plan, int64_t limit_bytes) {
  const int64_t resident = plan.resident_bytes();
  if (resident <= limit_bytes) return absl::OkStatus();
  // The three largest resident consumers.
  std::vector<std::pair<int64_t, PlanCategory>> consumers;
  for (int k = 0; k < kNumPlanCategories; ++k) {
    const PlanCategory cat = static_cast<PlanCategory>(k);
    const TierBytes t = plan.ByTier(cat);
    const int64_t r = t.device + t.host + (plan.nvme_ram_backed ? t.nvme : 0);
    if (r > 0) consumers.push_back({r, cat});
  }
  std::stable_sort(consumers.begin(), consumers.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> largest;
  for (size_t i = 0; i < consumers.size() && i < 3; ++i) {
    largest.push_back(absl::StrCat(PlanCategoryName(consumers[i].second), " ", FormatGiB(consumers[i].first)));
  }
  const std::string needs = absl::StrCat("rank ", plan.rank, " needs ", FormatGiB(resident), " resident, limit ",
                                         FormatGiB(limit_bytes), "; largest: ", absl::StrJoin(largest, ", "));
  const MemoryPlan floor = plan.Floor();
  if (floor.resident_bytes() > limit_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("memory plan exceeds the limit: the limit is below the plan's floor "
                                                     "(every state class offloaded: ",
                                                     FormatGiB(floor.resident_bytes()), "); ", needs));
  }
  // What validation accepts: optimizer_state, then master_weights, then
  // (stage 3) params, then (stages 2-3) grads, on NVME.
  OffloadOptions tiers;
  tiers.optimizer_state = plan.tier_of(PlanCategory::kOptimizerState);
  tiers.master_weights = plan.tier_of(PlanCategory::kMasterWeights);
  tiers.params = plan.tier_of(PlanCategory::kParams);
  tiers.grads = plan.tier_of(PlanCategory::kGrads);
  std::vector<std::string> set;
  for (PlanCategory cat : {PlanCategory::kOptimizerState, PlanCategory::kMasterWeights, PlanCategory::kParams,
                           PlanCategory::kGrads}) {
    if (plan.tier_of(cat) == OffloadTier::kNvme) continue;
    if (cat == PlanCategory::kParams && !plan.params_offloadable) continue;  // stage 3 only
    if (cat == PlanCategory::kGrads && !plan.grads_offloadable) continue;    // stages 2-3
    (cat == PlanCategory::kOptimizerState  ? tiers.optimizer_state
     : cat == PlanCategory::kMasterWeights ? tiers.master_weights
     : cat == PlanCategory::kParams        ? tiers.params
                                           : tiers.grads) = OffloadTier::kNvme;
    set.push_back(absl::StrCat("engine.offload.", PlanCategoryName(cat), ": NVME"));
    const MemoryPlan candidate = plan.WithOffload(tiers);
    if (candidate.resident_bytes() <= limit_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "memory plan exceeds the limit: ", needs, "; set ", absl::StrJoin(set, " and "), " (needs ",
          FormatGiB(candidate.resident_bytes()), " resident, ", DiskGB(candidate.nvme_bytes()), " in nvme_dir)"));
    }
  }
  return absl::ResourceExhaustedError(absl::StrCat("memory plan exceeds the limit: ", needs,
                                                   "; no offload setting this engine supports fits (the floor, "
                                                   "every state class offloaded, is ",
                                                   FormatGiB(floor.resident_bytes()), ")"));
}

absl::Status CheckOffloadDirectory(const MemoryPlan& plan, const std::string& dir, const FilesystemInfo& fs,
                                   int ranks_on_host) {
  const int64_t needed = plan.nvme_bytes() * std::max(1, ranks_on_host);
  if (needed == 0) return absl::OkStatus();
  if (!fs.writable) {
    return absl::FailedPreconditionError(absl::StrCat("offload directory ", dir, " is not writable; the plan puts ",
                                                      needed, " bytes (", DiskGB(needed), ") of offload files there"));
  }
  if (fs.available_bytes < needed) {
    return absl::ResourceExhaustedError(absl::StrCat("offload directory ", dir, " has ", fs.available_bytes,
                                                     " bytes available (", DiskGB(fs.available_bytes),
                                                     "), the plan needs ", needed, " bytes (", DiskGB(needed), ", ",
                                                     plan.nvme_bytes(), " for each of ", std::max(1, ranks_on_host),
                                                     " ranks on this host)"));
  }
  return absl::OkStatus();
}

int RanksOnHost(int fallback) { return LocalRanksFromEnvironment().value_or(std::max(1, fallback)); }

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return "";
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// /proc/self/cgroup's v2 line "0::/path" -> /sys/fs/cgroup/path/memory.max.
std::string CgroupMemoryMax() {
  for (absl::string_view line : absl::StrSplit(ReadFile("/proc/self/cgroup"), '\n')) {
    if (!absl::ConsumePrefix(&line, "0::")) continue;
    return ReadFile(absl::StrCat("/sys/fs/cgroup", line, line == "/" ? "" : "/", "memory.max"));
  }
  return "";
}

}  // namespace

absl::StatusOr<int64_t> ResolveMemoryLimitFrom(const EngineOptions& options, int ranks_on_host,
                                               const std::string& cgroup_max, const std::string& meminfo) {
  if (options.memory_limit_bytes > 0) return options.memory_limit_bytes;
  int64_t limit = -1;
  const absl::string_view cg = absl::StripAsciiWhitespace(cgroup_max);
  int64_t v = 0;
  if (!cg.empty() && cg != "max" && absl::SimpleAtoi(cg, &v) && v > 0) limit = v;
  for (absl::string_view line : absl::StrSplit(meminfo, '\n')) {
    if (!absl::ConsumePrefix(&line, "MemAvailable:")) continue;
    line = absl::StripAsciiWhitespace(line);
    absl::ConsumeSuffix(&line, "kB");
    int64_t kb = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kb)) limit = limit < 0 ? kb * 1024 : std::min(limit, kb * 1024);
  }
  if (limit < 0) {
    return absl::FailedPreconditionError(
        "engine.memory_limit_mib: 0 (from the host), but neither the cgroup's memory.max nor /proc/meminfo's "
        "MemAvailable could be read; set engine.memory_limit_mib");
  }
  return limit / std::max(1, ranks_on_host);
}

absl::StatusOr<int64_t> ResolveMemoryLimit(const EngineOptions& options, int ranks_on_host) {
  if (options.memory_limit_bytes > 0) return options.memory_limit_bytes;
  return ResolveMemoryLimitFrom(options, ranks_on_host, CgroupMemoryMax(), ReadFile("/proc/meminfo"));
}

int64_t MeasuredPeakRss() {
  for (absl::string_view line : absl::StrSplit(ReadFile("/proc/self/status"), '\n')) {
    if (!absl::ConsumePrefix(&line, "VmHWM:")) continue;
    line = absl::StripAsciiWhitespace(line);
    absl::ConsumeSuffix(&line, "kB");
    int64_t kb = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kb)) return kb * 1024;
  }
  return 0;
}

absl::Status CheckMeasuredPeakRss(int rank, int64_t measured_bytes, int64_t limit_bytes, bool limit_configured) {
  // limit + 10 %, exactly: measured * 10 > limit * 11.
  if (limit_bytes <= 0 || measured_bytes * 10 <= limit_bytes * 11) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "rank ", rank, ": measured peak RSS ", measured_bytes, " bytes (", FormatGiB(measured_bytes), ") exceeds ",
      limit_configured ? "engine.memory_limit_mib" : "the host's limit (engine.memory_limit_mib 0)", " ",
      limit_bytes, " bytes (", FormatGiB(limit_bytes), ") by more than 10 %; expected at most ",
      limit_bytes + limit_bytes / 10, " bytes"));
}

std::string FormatMemoryPlan(const MemoryPlan& plan, int64_t limit_bytes) {
  std::string out;
  absl::StrAppendFormat(&out, "  %-16s %12s %12s %12s %12s  %s\n", "category", "bytes", "device", "host", "nvme",
                        "tier");
  for (int k = 0; k < kNumPlanCategories; ++k) {
    const PlanCategory cat = static_cast<PlanCategory>(k);
    const TierBytes t = plan.ByTier(cat);
    absl::StrAppendFormat(&out, "  %-16s %12d %12d %12d %12d  %s\n", PlanCategoryName(cat), t.total(), t.device,
                          t.host, t.nvme, TierName(plan.tier_of(cat)));
  }
  if (plan.checkpoint_snapshot_bytes > 0) {
    absl::StrAppendFormat(&out, "  %-16s %12d %12d %12d %12d  %s\n", "ckpt_snapshot", plan.checkpoint_snapshot_bytes,
                          0, plan.checkpoint_snapshot_bytes, 0, "host");
  }
  const TierBytes total = plan.Totals();
  absl::StrAppendFormat(&out, "  %-16s %12d %12d %12d %12d\n", "total", total.total(), total.device, total.host,
                        total.nvme);
  absl::StrAppend(&out, "  resident peak ", plan.resident_bytes(), " (", FormatGiB(plan.resident_bytes()), ")",
                  ", nvme files ", plan.nvme_bytes(), " (", FormatGiB(plan.nvme_bytes()), ")");
  if (limit_bytes > 0) absl::StrAppend(&out, ", limit ", limit_bytes, " (", FormatGiB(limit_bytes), ")");
  absl::StrAppend(&out, "\n");
  for (const std::string& n : plan.notes) absl::StrAppend(&out, "  ", n, "\n");
  return out;
}

}  // namespace zeroshard
