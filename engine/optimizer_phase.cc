#include "engine/optimizer_phase.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/status_agreement.h"
#include "comm/traced_wait.h"
#include "core/status_macros.h"
#include "core/stopwatch.h"
#include "kernels/scale.h"
#include "kernels/sum_squares.h"
#include "sharding/grad_clip.h"

namespace zeroshard {
namespace {

using Clock = SteadyClock;

// Indices into REDUCE_NORM's all-reduce.
enum SumIndex { kSumSq, kLossSum, kLossWeight, kNonFinite, kFailedAllocations, kFirstMetric };

}  // namespace

absl::Status OptimizerPhase::WaitAll(std::vector<IssuedWork>& works, absl::string_view what) {
  for (IssuedWork& w : works) {
    RETURN_IF_ERROR(WaitTracedOn(*w.work, res_->compute.kernels.cuda_stream, res_->timeline.get(), "publish", what,
                                 w.shard->layout().unit_name(), w.issued, w.bytes));
  }
  return absl::OkStatus();
}

void OptimizerPhase::Start(StepResult* result, OptimizerPhaseState* phase_state) {
  OptimizerPhaseState& phase = *phase_state;
  if (phase.started) return;
  phase.started = true;
  if (res_->timeline != nullptr) phase.span.emplace(res_->timeline.get(), "optimizer", "optimizer");
  const int L = res_->num_units();
  NotifyGradients(&EngineObserver::OnReducedGradient, state_->attempts());
  result->loss_scale = state_->scaler().scale();
  phase.unit_sumsq.assign(L, 0.0);
  // Every WAIT_REDUCE precedes the phase: the stored gradients are final.
  if (grads_stream()) state_->offload()->EndReductions();
}

absl::Status OptimizerPhase::Run(const Action& a, absl::Span<const LossTerms> losses, double nominal_weight,
                                 StepResult* result, OptimizerPhaseState* phase) {
  Start(result, phase);
  switch (a.kind) {
    case ActionKind::kTiedReduce:
      return TiedReduce(a.unit);
    case ActionKind::kNormPartial:
      return NormPartial(a.bucket, phase);
    case ActionKind::kReduceNorm:
      return ReduceNorm(losses, nominal_weight, result, phase);
    case ActionKind::kUpdate:
      return a.chunk >= 0 ? UpdateChunk(a.chunk, result, phase) : Update(a.bucket, result, phase);
    case ActionKind::kPublish:
      return Publish(a.bucket, result, phase);
    case ActionKind::kTiedPublish:
      return TiedPublish(a.unit, result, phase);
    case ActionKind::kScalerUpdate:
      return ScalerUpdate(result, phase);
    default:
      return absl::InternalError(absl::StrCat(ActionKindName(a.kind), " is not an optimizer-phase action"));
  }
}

// A weight both ends of the pipeline hold: the two copies' reduced shards
// are summed over the embedding group, in unit order on both ends, so the
// copies take bitwise the same update.
// Grads on NVMe: the stored shard is read back into a grad staging buffer
// (every reduction has been stored), summed, its NORM_PARTIAL sum of squares
// retaken and stored again before any chunk reads it (the phase's loads
// follow every TIED_REDUCE).
absl::Status OptimizerPhase::TiedReduce(int u) {
  const int64_t n = res_->plan.layouts[u].shard_numel();
  const int region = state_->optimizer_region(u);
  const bool streamed = grads_stream() && region >= 0;
  UnitShard& shard = *state_->unit_shard(u);
  if (streamed) {
    float* staged = reinterpret_cast<float*>(state_->offload()->BeginGradStaging());
    state_->offload()->LoadGrads(region, staged);
    shard.BindGradShard(staged);
  }
  const Clock::time_point issued = Clock::now();
  std::unique_ptr<Work> tied = res_->comms.embedding->AllReduce(shard.grad_shard(), n, DType::kF32, ReduceOp::kSum);
  RETURN_IF_ERROR(WaitTracedOn(*tied, res_->compute.kernels.cuda_stream, res_->timeline.get(), "allreduce",
                               "AllReduce tied grads", res_->plan.layouts[u].unit_name(), issued, n * 4));
  if (!streamed) return absl::OkStatus();
  stored_sumsq_.resize(res_->num_units(), 0.0);
  RETURN_IF_ERROR(UnitSumSquares({u}, &stored_sumsq_));
  state_->offload()->StoreGrads(region, shard.grad_shard());
  shard.BindGradShard(nullptr);
  return absl::OkStatus();
}

// One summation order: each shard's sum of squares by the kernel's fixed
// chunks; REDUCE_NORM adds the units in unit order. A mirror is counted on
// the stage that computes the unit, once; a parameter every tp rank holds
// whole (replicated) on tp rank 0 only, so the world sum counts it once;
// under hybrid sharding a shard on the first of its replicas only.
absl::Status OptimizerPhase::UnitSumSquares(const std::vector<int>& units, std::vector<double>* by_unit) {
  for (int u : units) (*by_unit)[u] = 0;
  if (res_->comms.replica != nullptr && res_->comms.replica->rank() != 0) return absl::OkStatus();
  std::vector<kernels::SumSquaresSpan> spans;
  std::vector<std::pair<int, size_t>> unit_end;  // (unit, end of its spans)
  for (int u : units) {
    if (state_->optimizer_region(u) < 0 || res_->plan.units[u].mirror || res_->plan.layouts[u].shard_numel() == 0)
      continue;
    if (res_->tp_rank() == 0) {
      spans.push_back({state_->unit_shard(u)->grad_shard(), res_->plan.layouts[u].shard_numel()});
    } else {
      const std::vector<ParamSpec>& specs = res_->model->units[u]->params();
      for (const ShardSegment& seg : res_->plan.layouts[u].SegmentsForRank(res_->comms.dp->rank())) {
        if (specs[seg.param_index].partition.replicated()) continue;
        spans.push_back({state_->unit_shard(u)->grad_shard() + seg.offset_in_shard, seg.length});
      }
    }
    unit_end.push_back({u, spans.size()});
  }
  std::vector<double> parts(spans.size(), 0.0);
  RETURN_IF_ERROR(kernels::SumOfSquaresMany(res_->compute.kernels, spans, DType::kF32, parts.data()));
  size_t i = 0;
  for (const auto& [u, end] : unit_end) {
    double x = 0;
    for (; i < end; ++i) x += parts[i];
    (*by_unit)[u] = x;
  }
  return absl::OkStatus();
}

absl::Status OptimizerPhase::NormPartial(int bucket, OptimizerPhaseState* phase_state) {
  const std::vector<int>& units = res_->plan.buckets[bucket].units;
  if (!grads_stream()) return UnitSumSquares(units, &phase_state->unit_sumsq);
  for (int u : units) phase_state->unit_sumsq[u] = stored_sumsq_[u];
  return absl::OkStatus();
}

absl::Status OptimizerPhase::StageReducedGrads(int bucket) {
  if (!grads_stream()) return absl::OkStatus();
  char* at = state_->offload()->BeginGradStaging();
  for (int u : res_->plan.buckets[bucket].units) {
    if (state_->optimizer_region(u) < 0) continue;
    const int64_t bytes = AlignIo(res_->plan.layouts[u].shard_numel() * 4);
    const int region = state_->optimizer_region(u);
    if (state_->offload()->grads_stored(region)) {
      // A later micro-batch's reduction adds into what the earlier ones stored.
      state_->offload()->LoadGrads(region, reinterpret_cast<float*>(at));
    } else {
      std::memset(at, 0, bytes);  // the resident shard is zeroed at BEGIN_STEP
    }
    state_->unit_shard(u)->BindGradShard(bytes == 0 ? nullptr : reinterpret_cast<float*>(at));
    at += bytes;
  }
  return absl::OkStatus();
}

absl::Status OptimizerPhase::StoreReducedGrads(int bucket) {
  if (!grads_stream()) return absl::OkStatus();
  const std::vector<int>& units = res_->plan.buckets[bucket].units;
  stored_sumsq_.resize(res_->num_units(), 0.0);
  RETURN_IF_ERROR(UnitSumSquares(units, &stored_sumsq_));
  for (int u : units) {
    if (state_->optimizer_region(u) < 0) continue;
    UnitShard& shard = *state_->unit_shard(u);
    state_->offload()->StoreGrads(state_->optimizer_region(u), shard.grad_shard());
    shard.BindGradShard(nullptr);
  }
  return absl::OkStatus();
}

absl::Status OptimizerPhase::ReduceNorm(absl::Span<const LossTerms> losses, double nominal_weight, StepResult* result,
                                        OptimizerPhaseState* phase_state) {
  OptimizerPhaseState& phase = *phase_state;
  const int L = res_->num_units();
  const double scale = state_->scaler().scale();
  // Units this rank does not count hold 0, which leaves the sum's bits alone.
  double sumsq = 0;
  for (int u = 0; u < L; ++u) sumsq += phase.unit_sumsq[u];
  // The all-gathered f32 gradients need a full buffer of their own when the
  // compute dtype is too narrow. Allocated before the all-reduce, which
  // tells every rank whether any rank failed.
  phase.full_f32.clear();
  phase.full_f32.resize(L);
  absl::Status allocated;
  if (res_->options.zero.needs_full_f32_grads(res_->options.compute_dtype != DType::kF32)) {
    for (int u = 0; u < L && allocated.ok(); ++u) {
      if (state_->optimizer_region(u) < 0) continue;
      absl::StatusOr<Buffer> f = Buffer::Allocate(&res_->tracker, MemoryCategory::kCommBuffers, res_->device(),
                                                  DType::kF32, res_->plan.layouts[u].padded_numel());
      if (f.ok()) {
        phase.full_f32[u] = std::move(*f);
      } else {
        allocated = f.status();
      }
    }
  }
  WeightedSum loss;
  std::vector<WeightedSum> metrics(res_->plan.metric_names.size());
  // A tp group's ranks hold the same loss terms: counted once. Sums a GPU
  // left on the device come back now (the norm's read-back has waited for
  // the stream already).
  absl::Status losses_read;  // a failure is agreed on like a failed allocation
  for (const LossTerms& on_device : res_->tp_rank() == 0 ? losses : absl::Span<const LossTerms>()) {
    absl::StatusOr<LossTerms> resolved = ResolveLossTerms(on_device);
    if (!resolved.ok()) {
      if (losses_read.ok()) losses_read = resolved.status();
      continue;
    }
    const LossTerms& terms = *resolved;
    loss.sum += terms.loss.sum;
    loss.weight += terms.loss.weight;
    for (size_t i = 0; i < metrics.size(); ++i) {
      metrics[i].sum += terms.metrics[i].sum;
      metrics[i].weight += terms.metrics[i].weight;
    }
  }
  // The overflow check is a 0/1 flag summed over the group, never the raw
  // values (MPI's MAX over NaN depends on the order).
  std::vector<float> sums(kFirstMetric + 2 * metrics.size(), 0.0f);
  sums[kSumSq] = static_cast<float>(sumsq / (scale * scale));
  sums[kLossSum] = static_cast<float>(loss.sum);
  sums[kLossWeight] = static_cast<float>(loss.weight);
  sums[kNonFinite] = std::isfinite(sumsq) ? 0.0f : 1.0f;
  sums[kFailedAllocations] = allocated.ok() && losses_read.ok() ? 0.0f : 1.0f;
  for (size_t i = 0; i < metrics.size(); ++i) {
    sums[kFirstMetric + 2 * i] = static_cast<float>(metrics[i].sum);
    sums[kFirstMetric + 2 * i + 1] = static_cast<float>(metrics[i].weight);
  }
  const Clock::time_point t0 = Clock::now();
  const int64_t n = static_cast<int64_t>(sums.size());
  RETURN_IF_ERROR(res_->HostCollective(
      *res_->comms.world, sums.data(), n, sums.data(), n,
      [&](const void*, void* buf) { return res_->comms.world->AllReduce(buf, n, DType::kF32, ReduceOp::kSum); },
      [&](Work& w) {
        return WaitTraced(w, res_->timeline.get(), "allreduce", "AllReduce", "grad norm, loss, overflow", t0,
                          n * static_cast<int64_t>(sizeof(float)));
      }));
  result->timings.publish_wait += SecondsSince(t0);
  if (!allocated.ok()) return allocated;
  if (!losses_read.ok()) return losses_read;
  if (sums[kFailedAllocations] != 0.0f) {
    return RelayedError(
        absl::StatusCode::kResourceExhausted,
        absl::StrCat("the optimizer's stage-0 gradient buffers could not be allocated or the loss read on ",
                     sums[kFailedAllocations], " rank(s) (see their errors); this rank (", res_->comms.world->rank(),
                     ") was fine"));
  }
  result->overflow = sums[kNonFinite] != 0.0f;
  result->loss_weight = sums[kLossWeight];
  result->loss = sums[kLossSum] / sums[kLossWeight];
  for (size_t i = 0; i < metrics.size(); ++i) {
    result->metrics.push_back(
        {res_->plan.metric_names[i], static_cast<double>(sums[kFirstMetric + 2 * i]) / sums[kFirstMetric + 2 * i + 1]});
  }
  // The reduced shard is the gradient of Σsum / nominal weight (the seed);
  // this ratio makes it that of the mean over the actual weight.
  const double ratio = nominal_weight / static_cast<double>(sums[kLossWeight]);
  result->grad_norm = static_cast<float>(std::sqrt(sums[kSumSq]) * ratio);
  result->lr = static_cast<float>(state_->schedule().LearningRate(state_->step() + 1));
  const float coeff = ClipCoefficient(result->grad_norm, res_->options.grad_clip);
  result->skipped = result->overflow || !std::isfinite(result->grad_norm);
  if (result->skipped) {
    state_->CountSkippedStep();
    return absl::OkStatus();
  }
  // Unscale, reweigh and clip in one multiply; nothing at all when it is 1.
  phase.update = true;
  phase.rescale = coeff < 1.0f || scale != 1.0 || ratio != 1.0;
  phase.factor = static_cast<float>(static_cast<double>(coeff) * ratio / scale);
  state_->CountStep();
  return absl::OkStatus();
}

absl::Status OptimizerPhase::FinishUnitGrads(const std::vector<int>& units, bool scale_shards, StepResult* result,
                                             OptimizerPhaseState* phase_state) {
  OptimizerPhaseState& phase = *phase_state;
  for (int u : units) {
    if (state_->optimizer_region(u) < 0) continue;
    if (scale_shards && phase.rescale && res_->plan.layouts[u].shard_numel() > 0) {
      RETURN_IF_ERROR(kernels::ScaleInPlace(res_->compute.kernels, state_->unit_shard(u)->grad_shard(),
                                            res_->plan.layouts[u].shard_numel(), DType::kF32, phase.factor, nullptr));
    }
    NotifyGradient(&EngineObserver::OnFinalGradient, state_->attempts(), u);
  }
  if (!res_->options.zero.all_gathers_reduced_grads()) return absl::OkStatus();
  // The second half of the all-reduce: every rank gets every reduced shard.
  std::vector<IssuedWork> works;
  for (int u : units) {
    UnitShard& shard = *state_->unit_shard(u);
    if (state_->optimizer_region(u) < 0 || res_->plan.layouts[u].shard_numel() == 0) continue;
    void* dst = phase.full_f32[u].empty() ? shard.full_grads() : phase.full_f32[u].data();
    works.push_back({Clock::now(), &shard, res_->plan.layouts[u].padded_numel() * 4, nullptr});
    works.back().work =
        res_->comms.dp->AllGather(shard.grad_shard(), dst, res_->plan.layouts[u].shard_numel(), DType::kF32);
  }
  const Clock::time_point t0 = Clock::now();
  RETURN_IF_ERROR(WaitAll(works, "AllGather grads"));
  result->timings.publish_wait += SecondsSince(t0);
  return absl::OkStatus();
}

absl::Status OptimizerPhase::Update(int bucket, StepResult* result, OptimizerPhaseState* phase_state) {
  OptimizerPhaseState& phase = *phase_state;
  if (!phase.update) return absl::OkStatus();
  // A failed parameter-shard read (stage 3: no collective here): nothing is
  // computed, SCALER_UPDATE fails the step on every rank.
  if (state_->param_store() != nullptr && !state_->param_store()->status().ok()) return absl::OkStatus();
  const bool gathered = res_->options.zero.all_gathers_reduced_grads();
  if (state_->host_offload() != nullptr && !gathered) return UpdateOnHost(bucket, result, phase_state);
  const std::vector<int>& units = res_->plan.buckets[bucket].units;
  RETURN_IF_ERROR(FinishUnitGrads(units, /*scale_shards=*/true, result, phase_state));
  std::vector<int> regions;
  std::vector<float*> masters;
  std::vector<const float*> grads;
  for (int u : units) {
    if (state_->optimizer_region(u) < 0) continue;
    UnitShard& shard = *state_->unit_shard(u);
    regions.push_back(state_->optimizer_region(u));
    masters.push_back(shard.master());
    if (!res_->options.zero.all_gathers_reduced_grads()) {
      grads.push_back(shard.grad_shard());
    } else {
      grads.push_back(phase.full_f32[u].empty() ? static_cast<const float*>(shard.full_grads())
                                                : phase.full_f32[u].as<float>());
    }
  }
  if (state_->host_offload() != nullptr) {
    std::vector<int> with_region;
    for (int u : units) {
      if (state_->optimizer_region(u) >= 0) with_region.push_back(u);
    }
    return StepGatheredOnHost(bucket, with_region, grads, result);
  }
  int64_t elements = 0;
  for (int u : units) {
    if (state_->optimizer_region(u) >= 0) elements += state_->unit_shard(u)->master_numel();
  }
  // `elements` lets a cost profile price the update per element (docs/simulator.md).
  TraceScope span(res_->timeline.get(), "optimizer", "update", {}, {{"bucket", bucket}, {"elements", elements}});
  return state_->optimizer().StepRegions(regions, masters, grads, result->lr, state_->step());
}

// UPDATE of one streamed chunk (docs/offload_streaming.md): at the unit's
// first chunk its gradient shard is unscaled and clipped (stage 0: then
// all-gathered), as Update does for the whole unit; then the optimizer
// updates the chunk's elements where they are — the slot for the classes
// on the NVMe tier, the resident buffers otherwise — and its masters are
// rounded into the compute parameters. After an I/O error the step's
// collectives still run but nothing is computed (SCALER_UPDATE fails it).
absl::Status OptimizerPhase::UpdateChunk(int c, StepResult* result, OptimizerPhaseState* phase_state) {
  OptimizerPhaseState& phase = *phase_state;
  if (!phase.update) return absl::OkStatus();
  const OffloadChunk& chunk = res_->plan.train.chunks[c];
  const int u = chunk.unit;
  const int region = state_->optimizer_region(u);
  UnitShard& shard = *state_->unit_shard(u);
  OffloadStore& store = *state_->offload();
  const bool streamed_grads = store.streams_grads();
  // A streamed gradient piece is unscaled below, chunk by chunk.
  if (chunk.begin == 0) RETURN_IF_ERROR(FinishUnitGrads({u}, /*scale_shards=*/!streamed_grads, result, phase_state));
  if (!store.status().ok()) return absl::OkStatus();
  if (state_->param_store() != nullptr && !state_->param_store()->status().ok()) return absl::OkStatus();
  const float* grads = nullptr;
  if (streamed_grads) {
    // The chunk's piece, unscaled and clipped here: the multiply is
    // element-wise, so by chunk it gives the whole shard's bits.
    float* piece = store.slot_grads(chunk.slot);
    if (phase.rescale) {
      RETURN_IF_ERROR(
          kernels::ScaleInPlace(res_->compute.kernels, piece, chunk.length, DType::kF32, phase.factor, nullptr));
    }
    grads = piece;
  } else if (!res_->options.zero.all_gathers_reduced_grads()) {
    grads = shard.grad_shard() + chunk.begin;
  } else {
    const float* full =
        phase.full_f32[u].empty() ? static_cast<const float*>(shard.full_grads()) : phase.full_f32[u].as<float>();
    grads = full + chunk.begin;
  }
  float* master = state_->master_streams(u) ? store.slot_master(chunk.slot) : shard.master() + chunk.begin;
  std::vector<void*> states;
  const int kinds = static_cast<int>(state_->optimizer().state_kinds().size());
  for (int k = 0; k < kinds; ++k) {
    states.push_back(state_->state_streams() ? static_cast<void*>(store.slot_state(chunk.slot, k))
                                             : static_cast<void*>(state_->optimizer().mutable_state(k, region).as<float>() +
                                                                  chunk.begin));
  }
  TraceScope span(res_->timeline.get(), "optimizer", "update", {}, {{"bucket", chunk.bucket}, {"chunk", c}, {"elements", chunk.length}});
  RETURN_IF_ERROR(
      state_->optimizer().StepChunk(region, chunk.begin, chunk.length, master, grads, states, result->lr, state_->step()));
  return shard.RoundMasterRange(chunk.begin, chunk.length, master);
}

absl::Status OptimizerPhase::Publish(int bucket, StepResult* result, OptimizerPhaseState* phase) {
  if (!phase->update) return absl::OkStatus();
  // Streamed: the chunks rounded their masters; only the all-gather is left.
  // Host offload: UPDATE pushed them; the compute stream (and the NCCL
  // all-gather it orders) waits for the push.
  if (state_->host_offload() != nullptr) RETURN_IF_ERROR(OrderHostParams(bucket));
  const bool rounded = state_->offload() != nullptr || state_->host_offload() != nullptr;
  std::vector<IssuedWork> works;
  for (int u : res_->plan.buckets[bucket].units) {
    if (state_->optimizer_region(u) < 0) continue;  // frozen: nothing changed
    UnitShard& shard = *state_->unit_shard(u);
    const Clock::time_point issued = Clock::now();
    ASSIGN_OR_RETURN(std::unique_ptr<Work> w, rounded ? shard.PublishRounded() : shard.PublishMaster());
    const int64_t bytes =
        res_->plan.layouts[u].padded_numel() * static_cast<int64_t>(DTypeSize(res_->options.compute_dtype));
    if (w != nullptr) works.push_back({issued, &shard, bytes, std::move(w)});
  }
  const Clock::time_point t0 = Clock::now();
  RETURN_IF_ERROR(WaitAll(works, "AllGather params"));
  result->timings.publish_wait += SecondsSince(t0);
  return absl::OkStatus();
}

// Both ends skip it alike after a skipped step (REDUCE_NORM's flags are
// the world's). After a failed parameter-shard read it still runs, so no
// peer is left in the broadcast; SCALER_UPDATE fails the step.
absl::Status OptimizerPhase::TiedPublish(int unit, StepResult* result, OptimizerPhaseState* phase) {
  if (!phase->update) return absl::OkStatus();
  const Clock::time_point t0 = Clock::now();
  RETURN_IF_ERROR(state_->PublishTiedParams(unit, [&](Work& w, int64_t bytes) {
    return WaitTracedOn(w, res_->compute.kernels.cuda_stream, res_->timeline.get(), "publish", "Broadcast tied params",
                        res_->plan.layouts[unit].unit_name(), Clock::now(), bytes);
  }));
  result->timings.publish_wait += SecondsSince(t0);
  return absl::OkStatus();
}

absl::Status OptimizerPhase::ScalerUpdate(StepResult* result, OptimizerPhaseState* phase) {
  // Every action of the step saw the same attempt count (the RNG keys, the
  // observer's events); the next step is the next attempt.
  state_->CountAttempt();
  // No copy may still read a gradient shard freed below (a skipped step
  // never waited for its fetches).
  if (state_->host_offload() != nullptr) RETURN_IF_ERROR(state_->host_offload()->Drain());
  phase->full_f32.clear();
  for (auto& shard : state_->shards()) {
    if (shard != nullptr) shard->FreeGradShard();
  }
  state_->reducer().FreeStaging();
  if (grads_stream()) state_->offload()->EndGradStep();
  if (state_->offload() != nullptr || state_->param_store() != nullptr) {
    // An I/O error of the NVMe tier on any rank fails the step on every
    // rank (the stores keep it rather than stopping one rank alone).
    const absl::Status io = state_->offload() != nullptr && !state_->offload()->status().ok()
                                ? state_->offload()->status()
                            : state_->param_store() != nullptr ? state_->param_store()->status()
                                                               : absl::OkStatus();
    RETURN_IF_ERROR(
        AgreeAcrossRanksSharingError(*res_->comms.control, io, "the optimizer step's NVMe offload I/O"));
  }
  result->step = state_->step();
  result->skipped_steps = state_->skipped_steps();
  // Every rank updates its scaler with the same all-reduced flag.
  absl::Status scaled = state_->scaler().Update(result->overflow);
  result->overflows = state_->scaler().overflows();
  result->next_loss_scale = state_->scaler().scale();
  phase->span.reset();
  return scaled;
}

void OptimizerPhase::NotifyGradients(void (EngineObserver::*event)(const GradientEvent&), int64_t attempt) {
  if (res_->observers.empty()) return;
  for (int u = 0; u < res_->num_units(); ++u) NotifyGradient(event, attempt, u);
}

void OptimizerPhase::NotifyGradient(void (EngineObserver::*event)(const GradientEvent&), int64_t attempt, int unit) {
  if (res_->observers.empty() || state_->optimizer_region(unit) < 0) return;
  // A shard on the NVMe tier is not in memory: the event carries none.
  float* shard = state_->unit_shard(unit)->grad_shard();
  const GradientEvent grad{attempt, unit, shard, shard == nullptr ? 0 : res_->plan.layouts[unit].shard_numel()};
  res_->Notify([&](EngineObserver& o) { (o.*event)(grad); });
}

}  // namespace zeroshard
