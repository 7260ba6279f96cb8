#include "nn/gelu.h"

#include "core/status_macros.h"
#include "kernels/gelu.h"
#include "nn/tensor_checks.h"

namespace zeroshard {

absl::Status Gelu::Forward(const ComputeContext& ctx, const TensorView& x, const TensorView& y) const {
  const DType dt = ctx.compute_dtype;
  const Device dev = ctx.kernels.device;
  RETURN_IF_ERROR(CheckTensor(x, "gelu input", dt, x.shape, dev));
  RETURN_IF_ERROR(CheckTensor(y, "gelu output", dt, x.shape, dev));
  return kernels::GeluForward(ctx.kernels, y.data, x.data, x.numel(), dt);
}

absl::Status Gelu::Backward(const ComputeContext& ctx, const TensorView& x, const TensorView& dy,
                            const TensorView& dx) const {
  const DType dt = ctx.compute_dtype;
  const Device dev = ctx.kernels.device;
  RETURN_IF_ERROR(CheckTensor(x, "gelu input", dt, x.shape, dev));
  RETURN_IF_ERROR(CheckTensor(dy, "gelu output grad", dt, x.shape, dev));
  RETURN_IF_ERROR(CheckTensor(dx, "gelu input grad", dt, x.shape, dev));
  return kernels::GeluBackward(ctx.kernels, dx.data, x.data, dy.data, x.numel(), dt);
}

}  // namespace zeroshard
