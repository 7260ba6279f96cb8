// The model interface the sharding engine drives (DESIGN.md §5).
//
// A model is an ordered list of Units (FSDP-style wrap units). For each unit
// the engine gathers its parameters into views of the compute dtype, calls
// Forward, and later Backward, then releases the parameters. Units hold no
// parameter memory and no state between calls: everything Backward needs
// travels in the SavedActivations that Forward returned, so the engine may
// drop it (activation checkpointing) and call Forward again to rebuild it.
//
// Shape legend: B batch (micro-batch rows), T sequence length, C channels,
// V vocabulary size.
//
// On CUDA, units queue their kernels on ctx.kernels.cuda_stream and return
// without waiting, with one exception: the last unit's Backward reads
// grad_out on the host, after waiting for the device (nn/device_sync.h).
#ifndef ZEROSHARD_NN_UNIT_H_
#define ZEROSHARD_NN_UNIT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/buffer.h"
#include "core/dtype.h"
#include "core/memory_tracker.h"
#include "kernels/context.h"

namespace zeroshard {

enum class InitKind { kNormal, kZeros, kOnes };

// One parameter tensor of a unit.
struct ParamSpec {
  std::string name;            // Hugging Face name, e.g. "h.0.attn.c_attn.weight"
  std::vector<int64_t> shape;  // e.g. {C, 3C} (HF Conv1D layout: y = x·W + b)
  InitKind init = InitKind::kNormal;
  float init_std = 0.02f;  // for kNormal; residual projections 0.02/sqrt(2*n_layer)

  int64_t numel() const;
};

// Where and how a unit computes. Buffers a unit allocates (outputs, saved
// activations, scratch) live on ctx.kernels.device in compute_dtype and are
// counted in `tracker` (which may be null: then nothing is counted).
struct ComputeContext {
  kernels::KernelContext kernels;
  DType compute_dtype = DType::kF32;
  MemoryTracker* tracker = nullptr;
};

// A micro-batch of token ids, (B, T) each, i32, on the compute device.
// targets[b, t] is the token that follows inputs[b, t].
struct TokenBatch {
  TensorView inputs;
  TensorView targets;
};

// What a unit's Forward kept for its Backward, counted as kActivations.
// Self-contained: Backward reads neither Forward's `in` nor its `out`, so the
// engine may free both once the next unit has consumed `out`.
class SavedActivations {
 public:
  virtual ~SavedActivations() = default;
  // Bytes held (the tracker's kActivations share of this object).
  virtual int64_t bytes() const = 0;
};

// One FSDP-style wrap unit. Implementations are stateless after
// construction, so one Unit may run several micro-batches and the same
// const Unit may be used from several threads on distinct buffers.
class Unit {
 public:
  virtual ~Unit() = default;

  // "embed", "h.3", "head".
  virtual const std::string& name() const = 0;

  // Owned parameters, in flat-buffer order.
  virtual const std::vector<ParamSpec>& params() const = 0;

  // Parameters owned by OTHER units that this unit also reads and whose
  // gradient it accumulates into (GPT-2's head borrows "wte.weight").
  virtual std::vector<std::string> borrowed_params() const { return {}; }

  // Runs the unit on one micro-batch.
  //   params: views in compute dtype of the owned params (params() order)
  //           followed by the borrowed params (borrowed_params() order).
  //   in:     (B,T,C) output of the previous unit; ignored by the first unit,
  //           which reads batch.inputs.
  //   out:    allocated here as kActivations: (B,T,C), or for the last unit
  //           the mean cross-entropy over B*T as a 1-element f32 tensor
  //           (computed against batch.targets).
  //   saved:  set to what Backward needs.
  // kInvalidArgument naming the tensor when a shape, dtype or device does not
  // match (e.g. a token >= V on CPU), kResourceExhausted when out of memory.
  virtual absl::Status Forward(const ComputeContext& ctx, absl::Span<const TensorView> params,
                               const TokenBatch& batch, const TensorView& in, Buffer* out,
                               std::unique_ptr<SavedActivations>* saved) = 0;

  // Backpropagates one micro-batch.
  //   grads:    views (compute dtype) parallel to params; ACCUMULATED (+=),
  //             so micro-batches and the tied weight's two uses compose.
  //   grad_out: last unit: a 1-element f32 holding d(objective)/d(mean loss)
  //             (the engine passes loss_scale / accumulation_steps);
  //             otherwise (B,T,C) = d(objective)/d(out).
  //   grad_in:  allocated here as kActivations and WRITTEN with
  //             d(objective)/d(in), (B,T,C); the first unit leaves it empty.
  //   saved:    what this unit's Forward returned for the same batch and
  //             params.
  virtual absl::Status Backward(const ComputeContext& ctx, absl::Span<const TensorView> params,
                                absl::Span<const TensorView> grads, const TokenBatch& batch,
                                const SavedActivations& saved, const TensorView& grad_out, Buffer* grad_in) = 0;
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
