#include "models/gpt2/gpt2_unit_helpers.h"

#include "core/status_macros.h"
#include "kernels/cast.h"
#include "nn/tensor_checks.h"

namespace zeroshard::gpt2_internal {

// A view of the same memory with another shape.
TensorView Reshaped(const TensorView& t, std::vector<int64_t> shape) {
  TensorView v = t;
  v.shape = std::move(shape);
  return v;
}

absl::Status CheckParamCount(const std::string& unit, absl::Span<const TensorView> views, size_t expected,
                             const char* what) {
  if (views.size() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat(unit, ": got ", views.size(), " ", what, " views, expected ", expected));
  }
  return absl::OkStatus();
}

// (B, T) of the batch's inputs; kInvalidArgument unless "inputs" (and
// "targets" when needed) are (B, T) i32 on the compute device.
absl::StatusOr<std::pair<int64_t, int64_t>> BatchShape(const ComputeContext& ctx, const Batch& batch,
                                                       bool need_targets) {
  ASSIGN_OR_RETURN(const TensorView inputs, batch.Get("inputs"));
  if (inputs.shape.size() != 2) return CheckTensor(inputs, "batch inputs", DType::kI32, {-1, -1}, ctx.kernels.device);
  const int64_t b = inputs.shape[0], t = inputs.shape[1];
  RETURN_IF_ERROR(CheckTensor(inputs, "batch inputs", DType::kI32, {b, t}, ctx.kernels.device));
  if (need_targets) {
    ASSIGN_OR_RETURN(const TensorView targets, batch.Get("targets"));
    RETURN_IF_ERROR(CheckTensor(targets, "batch targets", DType::kI32, {b, t}, ctx.kernels.device));
  }
  return std::make_pair(b, t);
}

// The (B, T, C) activation a block or the head receives: one tensor.
absl::StatusOr<TensorView> OnlyInput(const std::string& unit, absl::Span<const TensorView> in) {
  if (in.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(unit, ": got ", in.size(), " input tensors, expected 1"));
  }
  return in[0];
}

// A copy made on the kernels' stream (Cast to the same dtype is a copy), so it
// is ordered after the kernel that produced `src`.
absl::StatusOr<Buffer> CopyOf(const ComputeContext& ctx, const TensorView& src, MemoryCategory category) {
  ASSIGN_OR_RETURN(Buffer buf, AllocateOutputOnDevice(ctx, category, src.dtype, src.numel()));
  RETURN_IF_ERROR(kernels::Cast(ctx.kernels, buf.data(), src.dtype, src.data, src.dtype, src.numel()));
  return buf;
}

ParamSpec Spec(std::string name, std::vector<int64_t> shape, InitKind init, float std) {
  ParamSpec p;
  p.name = std::move(name);
  p.shape = std::move(shape);
  p.init = init;
  p.init_std = init == InitKind::kNormal ? std : 0.0f;
  return p;
}

ParamSpec NoDecay(ParamSpec p) {
  p.no_weight_decay = true;
  return p;
}

bool AllNull(std::initializer_list<const TensorView*> grads) {
  for (const TensorView* g : grads) {
    if (g->data != nullptr) return false;
  }
  return true;
}

}  // namespace zeroshard::gpt2_internal
