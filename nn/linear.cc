#include "nn/linear.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/linear.h"
#include "nn/tensor_checks.h"

namespace zeroshard {

absl::StatusOr<int64_t> Linear::CheckForward(
    const ComputeContext& ctx, const TensorView& weight, const TensorView& bias, const TensorView& x,
    std::initializer_list<std::pair<const TensorView*, const char*>> outputs) const {
  const DType dt = ctx.compute_dtype;
  const Device dev = ctx.kernels.device;
  if (x.shape.size() != 2) return CheckTensor(x, absl::StrCat(name_, " input"), dt, {-1, in_}, dev);
  const int64_t n = x.shape[0];
  RETURN_IF_ERROR(CheckTensor(x, absl::StrCat(name_, " input"), dt, {n, in_}, dev));
  RETURN_IF_ERROR(CheckTensor(weight, absl::StrCat(name_, ".weight"), dt, {in_, out_}, dev));
  if (bias.data != nullptr) RETURN_IF_ERROR(CheckTensor(bias, absl::StrCat(name_, ".bias"), dt, {out_}, dev));
  for (const auto& [view, what] : outputs) {
    RETURN_IF_ERROR(CheckTensor(*view, absl::StrCat(name_, " ", what), dt, {n, out_}, dev));
  }
  return n;
}

absl::Status Linear::Forward(const ComputeContext& ctx, const TensorView& weight, const TensorView& bias,
                             const TensorView& x, const TensorView& y) const {
  ASSIGN_OR_RETURN(const int64_t n, CheckForward(ctx, weight, bias, x, {{&y, "output"}}));
  return kernels::LinearForward(ctx.kernels, y.data, x.data, weight.data, bias.data, n, in_, out_,
                                ctx.compute_dtype);
}

absl::Status Linear::ForwardGelu(const ComputeContext& ctx, const TensorView& weight, const TensorView& bias,
                                 const TensorView& x, const TensorView& pre, const TensorView& y) const {
  ASSIGN_OR_RETURN(const int64_t n, CheckForward(ctx, weight, bias, x, {{&pre, "output"}, {&y, "gelu output"}}));
  return kernels::LinearGeluForward(ctx.kernels, y.data, pre.data, x.data, weight.data, bias.data, n, in_, out_,
                                    ctx.compute_dtype);
}

absl::Status Linear::Backward(const ComputeContext& ctx, const TensorView& weight, const TensorView& x,
                              const TensorView& dy, const TensorView& dx, const TensorView& dweight,
                              const TensorView& dbias) const {
  const DType dt = ctx.compute_dtype;
  const Device dev = ctx.kernels.device;
  if (dy.shape.size() != 2) return CheckTensor(dy, absl::StrCat(name_, " output grad"), dt, {-1, out_}, dev);
  const int64_t n = dy.shape[0];
  RETURN_IF_ERROR(CheckTensor(dy, absl::StrCat(name_, " output grad"), dt, {n, out_}, dev));
  if (dx.data != nullptr) {
    RETURN_IF_ERROR(CheckTensor(weight, absl::StrCat(name_, ".weight"), dt, {in_, out_}, dev));
    RETURN_IF_ERROR(CheckTensor(dx, absl::StrCat(name_, " input grad"), dt, {n, in_}, dev));
  }
  if (dweight.data != nullptr) {
    RETURN_IF_ERROR(CheckTensor(x, absl::StrCat(name_, " input"), dt, {n, in_}, dev));
    RETURN_IF_ERROR(CheckTensor(dweight, absl::StrCat(name_, ".weight grad"), dt, {in_, out_}, dev));
  }
  if (dbias.data != nullptr) {
    RETURN_IF_ERROR(CheckTensor(dbias, absl::StrCat(name_, ".bias grad"), dt, {out_}, dev));
  }
  return kernels::LinearBackward(ctx.kernels, dx.data, dweight.data, dbias.data, dy.data, x.data, weight.data, n,
                                 in_, out_, dt);
}

}  // namespace zeroshard
