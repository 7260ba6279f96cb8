// The optimizer phase's actions (engine/optimizer_program.h): TIED_REDUCE,
// NORM_PARTIAL, REDUCE_NORM, UPDATE, PUBLISH and SCALER_UPDATE.
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/status_agreement.h"
#include "comm/traced_wait.h"
#include "core/status_macros.h"
#include "core/stopwatch.h"
#include "engine/engine_impl.h"
#include "kernels/scale.h"
#include "kernels/sum_squares.h"
#include "sharding/grad_clip.h"

namespace zeroshard {
namespace {

using Clock = SteadyClock;

// Indices into REDUCE_NORM's all-reduce.
enum SumIndex { kSumSq, kLossSum, kLossWeight, kNonFinite, kFailedAllocations, kFirstMetric };

}  // namespace

absl::Status EngineImpl::WaitAll(std::vector<IssuedWork>& works, absl::string_view what) {
  for (IssuedWork& w : works) {
    RETURN_IF_ERROR(WaitTracedOn(*w.work, compute_.kernels.cuda_stream, timeline_.get(), "publish", what,
                                 w.shard->layout().unit_name(), w.issued, w.bytes));
  }
  return absl::OkStatus();
}

void EngineImpl::StartOptimizerPhase(RunContext* run) {
  OptimizerPhaseState& phase = run->optimizer;
  if (phase.started) return;
  phase.started = true;
  if (timeline_ != nullptr) phase.span.emplace(timeline_.get(), "optimizer", "optimizer");
  const int L = num_units();
  NotifyGradients(&EngineObserver::OnReducedGradient, attempts_);
  run->result->loss_scale = scaler_->scale();
  phase.unit_sumsq.assign(L, 0.0);
  phase.counted.assign(L, false);
}

absl::Status EngineImpl::RunOptimizerAction(const Action& a, RunContext* run) {
  StartOptimizerPhase(run);
  switch (a.kind) {
    case ActionKind::kTiedReduce:
      return TiedReduce(a.unit);
    case ActionKind::kNormPartial:
      return NormPartial(a.bucket, run);
    case ActionKind::kReduceNorm:
      return ReduceNorm(run);
    case ActionKind::kUpdate:
      return Update(a.bucket, run);
    case ActionKind::kPublish:
      return Publish(a.bucket, run);
    case ActionKind::kScalerUpdate:
      return ScalerUpdate(run);
    default:
      return absl::InternalError(absl::StrCat(ActionKindName(a.kind), " is not an optimizer-phase action"));
  }
}

// A weight both ends of the pipeline hold: the two copies' reduced shards
// are summed over the embedding group, in unit order on both ends, so the
// copies take bitwise the same update.
absl::Status EngineImpl::TiedReduce(int u) {
  const int64_t n = plan_.layouts[u].shard_numel();
  const Clock::time_point issued = Clock::now();
  std::unique_ptr<Work> tied = embedding_->AllReduce(shards_[u]->grad_shard(), n, DType::kF32, ReduceOp::kSum);
  return WaitTracedOn(*tied, compute_.kernels.cuda_stream, timeline_.get(), "allreduce", "AllReduce tied grads",
                      plan_.layouts[u].unit_name(), issued, n * 4);
}

// One summation order: each shard's sum of squares by the kernel's fixed
// chunks; REDUCE_NORM adds the units in unit order. A mirror is counted on
// the stage that computes the unit, once; a parameter every tp rank holds
// whole (replicated) on tp rank 0 only, so the world sum counts it once;
// under hybrid sharding a shard on the first of its replicas only.
absl::Status EngineImpl::NormPartial(int bucket, RunContext* run) {
  OptimizerPhaseState& phase = run->optimizer;
  if (replica_ != nullptr && replica_->rank() != 0) return absl::OkStatus();
  std::vector<kernels::SumSquaresSpan> spans;
  std::vector<std::pair<int, size_t>> unit_end;  // (unit, end of its spans)
  for (int u : plan_.buckets[bucket].units) {
    if (regions_[u] < 0 || plan_.units[u].mirror || plan_.layouts[u].shard_numel() == 0) continue;
    if (tp_rank() == 0) {
      spans.push_back({shards_[u]->grad_shard(), plan_.layouts[u].shard_numel()});
    } else {
      const std::vector<ParamSpec>& specs = model_->units[u]->params();
      for (const ShardSegment& seg : plan_.layouts[u].SegmentsForRank(dp_->rank())) {
        if (specs[seg.param_index].partition.replicated()) continue;
        spans.push_back({shards_[u]->grad_shard() + seg.offset_in_shard, seg.length});
      }
    }
    unit_end.push_back({u, spans.size()});
  }
  std::vector<double> parts(spans.size(), 0.0);
  RETURN_IF_ERROR(kernels::SumOfSquaresMany(compute_.kernels, spans, DType::kF32, parts.data()));
  size_t i = 0;
  for (const auto& [u, end] : unit_end) {
    double x = 0;
    for (; i < end; ++i) x += parts[i];
    phase.unit_sumsq[u] = x;
    phase.counted[u] = true;
  }
  return absl::OkStatus();
}

absl::Status EngineImpl::ReduceNorm(RunContext* run) {
  OptimizerPhaseState& phase = run->optimizer;
  StepResult* result = run->result;
  const int L = num_units();
  const double scale = scaler_->scale();
  double sumsq = 0;
  for (int u = 0; u < L; ++u) {
    if (phase.counted[u]) sumsq += phase.unit_sumsq[u];
  }
  // The all-gathered f32 gradients need a full buffer of their own when the
  // compute dtype is too narrow. Allocated before the all-reduce, which
  // tells every rank whether any rank failed.
  phase.full_f32.clear();
  phase.full_f32.resize(L);
  absl::Status allocated;
  if (options_.zero.needs_full_f32_grads(options_.compute_dtype != DType::kF32)) {
    for (int u = 0; u < L && allocated.ok(); ++u) {
      if (regions_[u] < 0) continue;
      absl::StatusOr<Buffer> f = Buffer::Allocate(&tracker_, MemoryCategory::kCommBuffers, device(), DType::kF32,
                                                  plan_.layouts[u].padded_numel());
      if (f.ok()) {
        phase.full_f32[u] = std::move(*f);
      } else {
        allocated = f.status();
      }
    }
  }
  WeightedSum loss;
  std::vector<WeightedSum> metrics(plan_.metric_names.size());
  // A tp group's ranks hold the same loss terms: counted once. Sums a GPU
  // left on the device come back now (the norm's read-back has waited for
  // the stream already).
  const std::vector<LossTerms> none;
  absl::Status losses_read;  // a failure is agreed on like a failed allocation
  for (const LossTerms& on_device : tp_rank() == 0 ? run->losses : none) {
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
  RETURN_IF_ERROR(HostCollective(
      *world_, sums.data(), n, sums.data(), n,
      [&](const void*, void* buf) { return world_->AllReduce(buf, n, DType::kF32, ReduceOp::kSum); },
      [&](Work& w) {
        return WaitTraced(w, timeline_.get(), "allreduce", "AllReduce", "grad norm, loss, overflow", t0,
                          n * static_cast<int64_t>(sizeof(float)));
      }));
  result->timings.publish_wait += SecondsSince(t0);
  if (!allocated.ok()) return allocated;
  if (!losses_read.ok()) return losses_read;
  if (sums[kFailedAllocations] != 0.0f) {
    return RelayedError(absl::StatusCode::kResourceExhausted, absl::StrCat(
        "the optimizer's stage-0 gradient buffers could not be allocated or the loss read on ",
        sums[kFailedAllocations], " rank(s) (see their errors); this rank (", world_->rank(), ") was fine"));
  }
  result->overflow = sums[kNonFinite] != 0.0f;
  result->loss_weight = sums[kLossWeight];
  result->loss = sums[kLossSum] / sums[kLossWeight];
  for (size_t i = 0; i < metrics.size(); ++i) {
    result->metrics.push_back(
        {plan_.metric_names[i], static_cast<double>(sums[kFirstMetric + 2 * i]) / sums[kFirstMetric + 2 * i + 1]});
  }
  // The reduced shard is the gradient of Σsum / nominal weight (the seed);
  // this ratio makes it that of the mean over the actual weight.
  const double ratio = run->nominal_weight / static_cast<double>(sums[kLossWeight]);
  result->grad_norm = static_cast<float>(std::sqrt(sums[kSumSq]) * ratio);
  result->lr = static_cast<float>(schedule_->LearningRate(step_ + 1));
  const float coeff = ClipCoefficient(result->grad_norm, options_.grad_clip);
  result->skipped = result->overflow || !std::isfinite(result->grad_norm);
  if (result->skipped) {
    ++skipped_steps_;
    return absl::OkStatus();
  }
  // Unscale, reweigh and clip in one multiply; nothing at all when it is 1.
  phase.update = true;
  phase.rescale = coeff < 1.0f || scale != 1.0 || ratio != 1.0;
  phase.factor = static_cast<float>(static_cast<double>(coeff) * ratio / scale);
  ++step_;
  return absl::OkStatus();
}

absl::Status EngineImpl::Update(int bucket, RunContext* run) {
  OptimizerPhaseState& phase = run->optimizer;
  if (!phase.update) return absl::OkStatus();
  const std::vector<int>& units = plan_.buckets[bucket].units;
  for (int u : units) {
    if (regions_[u] < 0) continue;
    if (phase.rescale && plan_.layouts[u].shard_numel() > 0) {
      RETURN_IF_ERROR(kernels::ScaleInPlace(compute_.kernels, shards_[u]->grad_shard(),
                                            plan_.layouts[u].shard_numel(), DType::kF32, phase.factor, nullptr));
    }
    NotifyGradient(&EngineObserver::OnFinalGradient, attempts_, u);
  }
  if (options_.zero.all_gathers_reduced_grads()) {
    // The second half of the all-reduce: every rank gets every reduced shard.
    std::vector<IssuedWork> works;
    for (int u : units) {
      UnitShard& shard = *shards_[u];
      if (regions_[u] < 0 || plan_.layouts[u].shard_numel() == 0) continue;
      void* dst = phase.full_f32[u].empty() ? shard.full_grads() : phase.full_f32[u].data();
      works.push_back({Clock::now(), &shard, plan_.layouts[u].padded_numel() * 4, nullptr});
      works.back().work = dp_->AllGather(shard.grad_shard(), dst, plan_.layouts[u].shard_numel(), DType::kF32);
    }
    const Clock::time_point t0 = Clock::now();
    RETURN_IF_ERROR(WaitAll(works, "AllGather grads"));
    run->result->timings.publish_wait += SecondsSince(t0);
  }
  std::vector<int> regions;
  std::vector<float*> masters;
  std::vector<const float*> grads;
  for (int u : units) {
    if (regions_[u] < 0) continue;
    UnitShard& shard = *shards_[u];
    regions.push_back(regions_[u]);
    masters.push_back(shard.master());
    if (!options_.zero.all_gathers_reduced_grads()) {
      grads.push_back(shard.grad_shard());
    } else {
      grads.push_back(phase.full_f32[u].empty() ? static_cast<const float*>(shard.full_grads())
                                                : phase.full_f32[u].as<float>());
    }
  }
  TraceScope span(timeline_.get(), "optimizer", "update", {}, {{"bucket", bucket}});
  return optimizer_->StepRegions(regions, masters, grads, run->result->lr, step_);
}

absl::Status EngineImpl::Publish(int bucket, RunContext* run) {
  if (!run->optimizer.update) return absl::OkStatus();
  std::vector<IssuedWork> works;
  for (int u : plan_.buckets[bucket].units) {
    if (regions_[u] < 0) continue;  // frozen: nothing changed
    UnitShard& shard = *shards_[u];
    const Clock::time_point issued = Clock::now();
    ASSIGN_OR_RETURN(std::unique_ptr<Work> w, shard.PublishMaster());
    const int64_t bytes = plan_.layouts[u].padded_numel() * static_cast<int64_t>(DTypeSize(options_.compute_dtype));
    if (w != nullptr) works.push_back({issued, &shard, bytes, std::move(w)});
  }
  const Clock::time_point t0 = Clock::now();
  RETURN_IF_ERROR(WaitAll(works, "AllGather params"));
  run->result->timings.publish_wait += SecondsSince(t0);
  return absl::OkStatus();
}

absl::Status EngineImpl::ScalerUpdate(RunContext* run) {
  StepResult* result = run->result;
  // Every action of the step saw the same attempt count (the RNG keys, the
  // observer's events); the next step is the next attempt.
  ++attempts_;
  run->optimizer.full_f32.clear();
  for (auto& shard : shards_) {
    if (shard != nullptr) shard->FreeGradShard();
  }
  reducer_->FreeStaging();
  result->step = step_;
  result->skipped_steps = skipped_steps_;
  // Every rank updates its scaler with the same all-reduced flag.
  absl::Status scaled = scaler_->Update(result->overflow);
  result->overflows = scaler_->overflows();
  result->next_loss_scale = scaler_->scale();
  run->optimizer.span.reset();
  return scaled;
}

}  // namespace zeroshard
