// The model interface the engine drives (docs/model.md).
//
// A model is an ordered list of Units (FSDP-style wrap units). The engine
// owns the order of calls: for each unit it makes the parameters available
// (gathered under ZeRO-3) as views in the compute dtype, calls Forward, and
// later Backward. Units hold no parameter memory and no state between calls:
// everything Backward needs travels in the SavedActivations that Forward
// returned, so the engine may drop it (activation checkpointing) and call
// Forward again to rebuild it.
//
// What flows:
//   * a Batch: named tensors of any dtype and shape, rows on dimension 0
//     (GPT-2: "inputs" and "targets", i32 (B, T); a classifier: "features",
//     "labels"). Every unit sees the whole micro-batch;
//   * between units, an ActivationPack: one or more tensors of any shape;
//   * the last unit returns LossTerms: a loss as (sum, weight) — the summed
//     loss and how many tokens or examples it covers — plus any further
//     metrics it declares, each a (sum, weight) pair. The engine reports
//     Σsum / Σweight over every rank and micro-batch, so any split of the
//     global batch gives the same number.
//
// Threads and streams: Forward and Backward are const and units keep no
// mutable state, so one Unit may run several micro-batches, and the same
// Unit may be called from several threads on distinct buffers. On CUDA a
// unit queues its kernels on ctx.compute.kernels.cuda_stream and returns
// without waiting for them, except to read its LossTerms back to the host
// (the last unit's Forward).
#ifndef ZEROSHARD_NN_UNIT_H_
#define ZEROSHARD_NN_UNIT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/buffer.h"
#include "core/dtype.h"
#include "core/memory_tracker.h"
#include "core/timeline.h"
#include "kernels/context.h"
#include "nn/batch.h"
#include "nn/param_spec.h"

namespace zeroshard {

class Communicator;

// Where and how a unit computes. Buffers a unit allocates (outputs, saved
// activations, scratch) live on kernels.device in compute_dtype and are
// counted in `tracker` (which may be null: then nothing is counted).
struct ComputeContext {
  kernels::KernelContext kernels;
  DType compute_dtype = DType::kF32;
  MemoryTracker* tracker = nullptr;
};

// The tensor-parallel group a unit belongs to. A tensor-parallel unit issues
// its tp collectives itself, in the same order on every tp rank. With
// size 1 (no tensor parallelism) `tp` may be null.
struct ParallelContext {
  Communicator* tp = nullptr;
  int tp_rank = 0;
  int tp_size = 1;
  bool sequence_parallel = false;
  // Sequence parallelism: a training forward saves its gathered LayerNorm
  // outputs, so the backward needs no second all-gather of them.
  bool keep_gathered_ln_outputs = false;
  // Where the tp collectives are drawn while it records (the engine's trace;
  // null: not traced).
  Timeline* timeline = nullptr;
};

struct UnitContext {
  ComputeContext compute;
  // false in evaluation: no backward follows (a unit may skip saving).
  bool training = true;
  // A pure function of (seed, step, micro-batch, unit) (UnitRngKey), so a
  // recomputed Forward draws the same random numbers as the first one.
  uint64_t rng_key = 0;
  int micro_batch = 0;
  // false: nothing before this unit needs d(objective)/d(in) (the units
  // before it are frozen); Backward may leave grad_in empty.
  bool input_grad = true;
  // Training only: keep the selective form's activations
  // (Unit::SupportsSelectiveCheckpointing); units without one ignore it.
  bool selective_checkpoint = false;
  ParallelContext parallel;
};

// The key UnitContext::rng_key holds: splitmix64 over the four values.
// `step` counts TrainStep calls (skipped ones included); evaluation uses
// step -1.
uint64_t UnitRngKey(uint64_t seed, int64_t step, int micro_batch, int unit);

// Tensors passed between units (a unit's output, or its gradient). Owns its
// buffers; each has a shape. Move-only.
class ActivationPack {
 public:
  ActivationPack() = default;
  ActivationPack(ActivationPack&&) = default;
  ActivationPack& operator=(ActivationPack&&) = default;

  void Add(Buffer buffer, std::vector<int64_t> shape);
  int size() const { return static_cast<int>(buffers_.size()); }
  bool empty() const { return buffers_.empty(); }
  Buffer& buffer(int i) { return buffers_[i]; }
  const std::vector<int64_t>& shape(int i) const { return shapes_[i]; }
  // Views of every tensor, in order (valid while the pack lives).
  std::vector<TensorView> views() const;
  int64_t bytes() const;
  void Clear();

 private:
  std::vector<Buffer> buffers_;
  std::vector<std::vector<int64_t>> shapes_;
};

// A summed quantity and what it is summed over; its mean is sum / weight.
struct WeightedSum {
  double sum = 0;
  double weight = 0;
};

// What the last unit's Forward returns.
struct LossTerms {
  WeightedSum loss;
  // Parallel to Unit::metric_names() (e.g. correct predictions over labels).
  std::vector<WeightedSum> metrics;
  // A unit computing on a device may leave its sums there instead: f32
  // [loss sum, loss weight, then (sum, weight) per metric]. The engine reads
  // them with the step's other sums (ResolveLossTerms), so a forward never
  // waits for the device.
  std::shared_ptr<const Buffer> device_sums;
};

// `terms` with device_sums (if any) read into loss and metrics (a copy that
// waits for the device); otherwise `terms` as they are.
absl::StatusOr<LossTerms> ResolveLossTerms(const LossTerms& terms);

struct UnitOutput {
  ActivationPack activations;  // every unit but the last
  LossTerms loss;              // the last unit
};

// What a unit's Forward kept for its Backward, counted as kActivations.
// Self-contained: Backward reads neither Forward's inputs nor its outputs,
// so the engine may free both once the next unit has consumed them.
class SavedActivations {
 public:
  virtual ~SavedActivations() = default;
  // Bytes held (the tracker's kActivations share of this object).
  virtual int64_t bytes() const = 0;
};

// One FSDP-style wrap unit.
class Unit {
 public:
  virtual ~Unit() = default;

  // "embed", "h.3", "head".
  virtual const std::string& name() const = 0;

  // Owned parameters, in flat-buffer order. All of a unit's parameters are
  // trainable, or all are frozen (Model::Validate).
  virtual const std::vector<ParamSpec>& params() const = 0;

  // Parameters owned by OTHER units that this unit also reads and whose
  // gradient it accumulates into (GPT-2's head borrows "wte.weight").
  virtual std::vector<std::string> borrowed_params() const { return {}; }

  // Last unit: names of the metrics its LossTerms carry besides the loss.
  virtual std::vector<std::string> metric_names() const { return {}; }

  // Last unit: the loss weight a micro-batch carries when nothing in it is
  // masked (GPT-2: B·T tokens; default: its rows). The engine starts
  // backward from loss_scale · dp / (the step's total nominal weight) and
  // corrects by nominal / actual total weight once, after the reduction,
  // so gradients have the magnitude of a mean (what loss scaling is tuned
  // for) and are exactly those of Σsum / Σweight. Must depend on the
  // batch's shapes only.
  virtual double NominalLossWeight(const Batch& batch) const { return static_cast<double>(batch.rows()); }

  // The memory planner's estimates for a micro-batch of `batch` rows of
  // `seq` tokens computed in `compute` (engine/memory_plan.h): the bytes
  // Forward keeps in *saved (counted as kActivations until Backward), and
  // the bytes of out->activations (alive until the next unit consumed
  // them). -1: not estimated (the planner then reports activations as
  // unknown). Without tensor parallelism.
  virtual int64_t EstimateSavedActivationBytes(int64_t batch, int64_t seq, DType compute) const { return -1; }
  virtual int64_t EstimateOutputActivationBytes(int64_t batch, int64_t seq, DType compute) const { return -1; }

  // Selective activation checkpointing (docs/model.md): a unit that returns
  // true keeps, when UnitContext::selective_checkpoint is set, only its
  // GEMMs' inputs and outputs and what cannot be rebuilt without a GEMM, and
  // its Backward (and BackwardInput/BackwardWeight) recomputes the rest from
  // them with the forward's kernels, so the results are bitwise those of a
  // full save. EstimateSelectiveSavedActivationBytes is then what Forward
  // keeps in that mode (default: everything, for units without one).
  virtual bool SupportsSelectiveCheckpointing() const { return false; }
  virtual int64_t EstimateSelectiveSavedActivationBytes(int64_t batch, int64_t seq, DType compute) const {
    return EstimateSavedActivationBytes(batch, seq, compute);
  }

  // Runs the unit on one micro-batch.
  //   params: views in compute dtype of the owned params (params() order)
  //           followed by the borrowed params (borrowed_params() order).
  //   in:     the previous unit's output pack; empty for the first unit.
  //   out:    every unit but the last fills out->activations (buffers
  //           allocated as kActivations); the last unit fills out->loss.
  //   saved:  set to what Backward needs (may stay null when
  //           !ctx.training).
  // kInvalidArgument naming the tensor when a shape, dtype or device does not
  // match (e.g. a token >= V on CPU), kResourceExhausted when out of memory.
  virtual absl::Status Forward(const UnitContext& ctx, absl::Span<const TensorView> params, const Batch& batch,
                               absl::Span<const TensorView> in, UnitOutput* out,
                               std::unique_ptr<SavedActivations>* saved) const = 0;

  // Backpropagates one micro-batch.
  //   grads:    views (compute dtype) parallel to params; ACCUMULATED (+=),
  //             so micro-batches and a tied weight's two uses compose. A
  //             frozen parameter's view has data == nullptr: skip it.
  //   grad_out: the last unit: one f32[1] HOST tensor holding
  //             d(objective)/d(loss sum); otherwise parallel to Forward's
  //             out->activations: d(objective)/d(out).
  //   grad_in:  filled with d(objective)/d(in), parallel to `in`
  //             (kActivations); the first unit leaves it empty.
  //   saved:    what this unit's Forward returned for the same batch and
  //             params.
  virtual absl::Status Backward(const UnitContext& ctx, absl::Span<const TensorView> params,
                                absl::Span<const TensorView> grads, const Batch& batch,
                                const SavedActivations& saved, absl::Span<const TensorView> grad_out,
                                ActivationPack* grad_in) const = 0;

  // Zero-bubble pipeline schedules split Backward into the input gradient
  // (BackwardInput) and the parameter gradients (BackwardWeight), run in
  // that order for the same micro-batch (other micro-batches' calls may
  // come between them). BackwardInput fills grad_in exactly as Backward
  // does and keeps in *weight_inputs what BackwardWeight needs (e.g. each
  // linear's output gradient); BackwardWeight accumulates into grads what
  // Backward would have, so the two together give bitwise Backward's
  // results. Units that implement both return true from
  // SupportsSplitBackward; the others are run with Backward.
  virtual bool SupportsSplitBackward() const { return false; }
  virtual absl::Status BackwardInput(const UnitContext& ctx, absl::Span<const TensorView> params,
                                     const Batch& batch, const SavedActivations& saved,
                                     absl::Span<const TensorView> grad_out, ActivationPack* grad_in,
                                     std::unique_ptr<SavedActivations>* weight_inputs) const;
  virtual absl::Status BackwardWeight(const UnitContext& ctx, absl::Span<const TensorView> grads,
                                      const Batch& batch, const SavedActivations& saved,
                                      const SavedActivations& weight_inputs) const;
};

// A Unit that keeps its name and parameter list; a subclass fills params_
// in its constructor (name_ is set before any member of the subclass is
// constructed, so member initialisers may use it).
class NamedUnit : public Unit {
 public:
  const std::string& name() const override { return name_; }
  const std::vector<ParamSpec>& params() const override { return params_; }

 protected:
  explicit NamedUnit(std::string name) : name_(std::move(name)) {}

  std::string name_;
  std::vector<ParamSpec> params_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_NN_UNIT_H_
