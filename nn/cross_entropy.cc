#include "nn/cross_entropy.h"

#include "core/status_macros.h"
#include "kernels/cross_entropy.h"
#include "nn/tensor_checks.h"

namespace zeroshard {

absl::Status CrossEntropy::Forward(const ComputeContext& ctx, const TensorView& logits, const TensorView& targets,
                                   const TensorView& losses, const TensorView& lse,
                                   const TensorView& loss_sums) const {
  const DType dt = ctx.compute_dtype;
  const Device dev = ctx.kernels.device;
  const int64_t n = logits.shape.size() == 2 ? logits.shape[0] : -1;
  RETURN_IF_ERROR(CheckTensor(logits, "logits", dt, {n, v_}, dev));
  RETURN_IF_ERROR(CheckTensor(targets, "targets", DType::kI32, {n}, dev));
  RETURN_IF_ERROR(CheckTensor(losses, "losses", DType::kF32, {n}, dev));
  RETURN_IF_ERROR(CheckTensor(lse, "log-sum-exp", DType::kF32, {n}, dev));
  RETURN_IF_ERROR(CheckTensor(loss_sums, "loss sums", DType::kF32, {2}, dev));
  return kernels::CrossEntropyForward(ctx.kernels, losses.as<float>(), lse.as<float>(), loss_sums.as<float>(),
                                      logits.data, targets.as<const int32_t>(), n, v_, dt);
}

absl::Status CrossEntropy::Backward(const ComputeContext& ctx, const TensorView& logits, const TensorView& lse,
                                    const TensorView& targets, float dloss, const TensorView& dlogits) const {
  const DType dt = ctx.compute_dtype;
  const Device dev = ctx.kernels.device;
  const int64_t n = logits.shape.size() == 2 ? logits.shape[0] : -1;
  RETURN_IF_ERROR(CheckTensor(logits, "logits", dt, {n, v_}, dev));
  RETURN_IF_ERROR(CheckTensor(lse, "log-sum-exp", DType::kF32, {n}, dev));
  RETURN_IF_ERROR(CheckTensor(targets, "targets", DType::kI32, {n}, dev));
  RETURN_IF_ERROR(CheckTensor(dlogits, "logits grad", dt, {n, v_}, dev));
  return kernels::CrossEntropyBackward(ctx.kernels, dlogits.data, logits.data, lse.as<const float>(),
                                       targets.as<const int32_t>(), dloss, n, v_, dt);
}

}  // namespace zeroshard
