#include "nn/tied_lm_head.h"

#include "core/status_macros.h"
#include "kernels/gemm.h"
#include "nn/tensor_checks.h"

namespace zeroshard {

using kernels::Transpose;

absl::Status TiedLmHead::Forward(const ComputeContext& ctx, const TensorView& wte, const TensorView& x,
                                 const TensorView& logits) const {
  const DType dt = ctx.compute_dtype;
  const Device dev = ctx.kernels.device;
  const int64_t n = x.shape.size() == 2 ? x.shape[0] : -1;
  RETURN_IF_ERROR(CheckTensor(x, "lm head input", dt, {n, c_}, dev));
  RETURN_IF_ERROR(CheckTensor(wte, "wte.weight", dt, {v_, c_}, dev));
  RETURN_IF_ERROR(CheckTensor(logits, "logits", dt, {n, v_}, dev));
  return kernels::Gemm(ctx.kernels, Transpose::kNo, Transpose::kYes, n, v_, c_, 1.0f, x.data, c_, wte.data, c_, 0.0f,
                       logits.data, v_, dt);
}

absl::Status TiedLmHead::Backward(const ComputeContext& ctx, const TensorView& wte, const TensorView& x,
                                  const TensorView& dlogits, const TensorView& dx, const TensorView& dwte) const {
  const DType dt = ctx.compute_dtype;
  const Device dev = ctx.kernels.device;
  const int64_t n = dlogits.shape.size() == 2 ? dlogits.shape[0] : -1;
  RETURN_IF_ERROR(CheckTensor(dlogits, "logits grad", dt, {n, v_}, dev));
  if (dx.data == nullptr && dwte.data == nullptr) {
    return absl::InvalidArgumentError("lm head backward: nothing to compute (input grad and wte.weight grad are null)");
  }
  if (dx.data != nullptr) {
    RETURN_IF_ERROR(CheckTensor(wte, "wte.weight", dt, {v_, c_}, dev));
    RETURN_IF_ERROR(CheckTensor(dx, "lm head input grad", dt, {n, c_}, dev));
  }
  if (dwte.data != nullptr) {
    RETURN_IF_ERROR(CheckTensor(x, "lm head input", dt, {n, c_}, dev));
    RETURN_IF_ERROR(CheckTensor(dwte, "wte.weight grad", dt, {v_, c_}, dev));
  }
  if (dx.data != nullptr) {
    RETURN_IF_ERROR(kernels::Gemm(ctx.kernels, Transpose::kNo, Transpose::kNo, n, c_, v_, 1.0f, dlogits.data, v_,
                                  wte.data, c_, 0.0f, dx.data, c_, dt));
  }
  if (dwte.data != nullptr) {
    RETURN_IF_ERROR(kernels::Gemm(ctx.kernels, Transpose::kYes, Transpose::kNo, v_, c_, n, 1.0f, dlogits.data, v_,
                                  x.data, c_, 1.0f, dwte.data, c_, dt));
  }
  return absl::OkStatus();
}

}  // namespace zeroshard
