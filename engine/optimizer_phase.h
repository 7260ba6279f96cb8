// OptimizerPhase: the optimizer phase's actions of a step program
// (engine/optimizer_program.h) — TIED_REDUCE, NORM_PARTIAL, REDUCE_NORM,
// UPDATE, PUBLISH, TIED_PUBLISH and SCALER_UPDATE — over the sharded state: the gradient
// norm and the step's loss in one fixed summation order, the skip decision,
// the unscale/reweigh/clip multiply, the optimizer's per-region step, the
// publication of the new weights, and the loss scaler's update. It sends
// the observers' gradient events.
//
// Thread-compatible; the resources and the state must outlive it.
#ifndef ZEROSHARD_ENGINE_OPTIMIZER_PHASE_H_
#define ZEROSHARD_ENGINE_OPTIMIZER_PHASE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/buffer.h"
#include "core/timeline.h"
#include "engine/engine.h"
#include "engine/engine_resources.h"
#include "engine/observer.h"
#include "engine/sharded_state.h"
#include "engine/step_program.h"
#include "nn/unit.h"

namespace zeroshard {

// The optimizer phase's state within one step.
struct OptimizerPhaseState {
  bool started = false;
  // NORM_PARTIAL's sums of squares by unit (0 for a unit this rank does not
  // count); REDUCE_NORM adds them in unit order.
  std::vector<double> unit_sumsq;
  std::vector<Buffer> full_f32;    // by unit: the all-gathered f32 gradients where the compute dtype is narrower
  bool update = false;             // REDUCE_NORM found the step finite: UPDATE and PUBLISH run
  bool rescale = false;            // unscale, reweigh and clip by `factor`
  float factor = 1.0f;
  std::optional<TraceScope> span;  // "optimizer", from its first action to SCALER_UPDATE
};

class OptimizerPhase {
 public:
  OptimizerPhase(EngineResources* resources, ShardedState* state) : res_(resources), state_(state) {}

  // Runs one optimizer-phase action of the step whose micro-batches left
  // `losses` (per micro-batch) and whose loss seed assumed `nominal_weight`;
  // fills *result (loss, norm, skip, scale). The step's first such action
  // opens the phase (the reduced-gradient events, the "optimizer" span).
  // kInternal for an action of another kind.
  absl::Status Run(const Action& action, absl::Span<const LossTerms> losses, double nominal_weight, StepResult* result,
                   OptimizerPhaseState* phase);

  // engine.offload.grads: NVME (docs/offload_streaming.md), around
  // WAIT_REDUCE(bucket)'s reducer Finish: StageReducedGrads binds the
  // bucket's gradient shards to a grad staging buffer (zeroed, or holding
  // what an earlier micro-batch stored in the step); after the
  // reduction landed there StoreReducedGrads takes each unit's NORM_PARTIAL
  // sum of squares from it (the same spans and kernel, so the same bits)
  // and writes the shards to the grads file. No-ops when grads are resident.
  absl::Status StageReducedGrads(int bucket);
  absl::Status StoreReducedGrads(int bucket);

 private:
  // A collective of the optimizer phase and what it moves, for WaitAll.
  struct IssuedWork {
    std::chrono::steady_clock::time_point issued;
    const UnitShard* shard;
    int64_t bytes;
    std::unique_ptr<Work> work;
  };

  void Start(StepResult* result, OptimizerPhaseState* phase);
  absl::Status TiedReduce(int unit);
  absl::Status TiedPublish(int unit, StepResult* result, OptimizerPhaseState* phase);
  absl::Status NormPartial(int bucket, OptimizerPhaseState* phase);
  // The sums of squares NORM_PARTIAL counts for `units`' current gradient
  // shards into by_unit[u] (0 for a unit this rank does not count).
  absl::Status UnitSumSquares(const std::vector<int>& units, std::vector<double>* by_unit);
  bool grads_stream() const { return state_->offload() != nullptr && state_->offload()->streams_grads(); }
  absl::Status ReduceNorm(absl::Span<const LossTerms> losses, double nominal_weight, StepResult* result,
                          OptimizerPhaseState* phase);
  absl::Status Update(int bucket, StepResult* result, OptimizerPhaseState* phase);
  absl::Status UpdateChunk(int chunk, StepResult* result, OptimizerPhaseState* phase);
  // The units' final gradients before their update: each resident shard
  // unscaled and clipped (when `scale_shards`), OnFinalGradient sent, and
  // (stage 0) every rank's reduced shards all-gathered.
  absl::Status FinishUnitGrads(const std::vector<int>& units, bool scale_shards, StepResult* result,
                               OptimizerPhaseState* phase);
  absl::Status Publish(int bucket, StepResult* result, OptimizerPhaseState* phase);
  // Host offload on a GPU (optimizer_phase_host.cc): UPDATE at stages 1-3,
  // the CPU step of a bucket's units over their fetched gradients, stage 0's
  // step over its all-gathered gradients, and PUBLISH's stream order.
  absl::Status UpdateOnHost(int bucket, StepResult* result, OptimizerPhaseState* phase);
  absl::Status StepOnHost(int bucket, absl::Span<const int> units, StepResult* result);
  absl::Status StepGatheredOnHost(int bucket, absl::Span<const int> units, absl::Span<const float* const> grads,
                                  StepResult* result);
  absl::Status OrderHostParams(int bucket);
  absl::Status ScalerUpdate(StepResult* result, OptimizerPhaseState* phase);
  absl::Status WaitAll(std::vector<IssuedWork>& works, absl::string_view what);
  // OnReducedGradient / OnFinalGradient for every trainable unit, or one.
  void NotifyGradients(void (EngineObserver::*event)(const GradientEvent&), int64_t attempt);
  void NotifyGradient(void (EngineObserver::*event)(const GradientEvent&), int64_t attempt, int unit);

  EngineResources* res_;
  ShardedState* state_;
  // Grads on NVMe: StoreReducedGrads's sums by unit, NORM_PARTIAL's input.
  std::vector<double> stored_sumsq_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_OPTIMIZER_PHASE_H_
