#include "nn/causal_self_attention.h"

#include "core/status_macros.h"
#include "kernels/attention.h"
#include "nn/tensor_checks.h"

namespace zeroshard {

absl::Status CausalSelfAttention::Forward(const ComputeContext& ctx, const TensorView& qkv, const TensorView& out,
                                          const TensorView& lse) const {
  const DType dt = ctx.compute_dtype;
  const Device dev = ctx.kernels.device;
  const int64_t b = qkv.shape.size() == 3 ? qkv.shape[0] : -1;
  const int64_t t = qkv.shape.size() == 3 ? qkv.shape[1] : -1;
  RETURN_IF_ERROR(CheckTensor(qkv, "attention qkv", dt, {b, t, 3 * c_}, dev));
  RETURN_IF_ERROR(CheckTensor(out, "attention output", dt, {b, t, c_}, dev));
  RETURN_IF_ERROR(CheckTensor(lse, "attention log-sum-exp", DType::kF32, {b, nh_, t}, dev));
  return kernels::AttentionForward(ctx.kernels, out.data, lse.as<float>(), qkv.data, b, t, c_, nh_, dt);
}

absl::Status CausalSelfAttention::Backward(const ComputeContext& ctx, const TensorView& qkv, const TensorView& out,
                                           const TensorView& lse, const TensorView& dout,
                                           const TensorView& dqkv) const {
  const DType dt = ctx.compute_dtype;
  const Device dev = ctx.kernels.device;
  const int64_t b = qkv.shape.size() == 3 ? qkv.shape[0] : -1;
  const int64_t t = qkv.shape.size() == 3 ? qkv.shape[1] : -1;
  RETURN_IF_ERROR(CheckTensor(qkv, "attention qkv", dt, {b, t, 3 * c_}, dev));
  RETURN_IF_ERROR(CheckTensor(out, "attention output", dt, {b, t, c_}, dev));
  RETURN_IF_ERROR(CheckTensor(lse, "attention log-sum-exp", DType::kF32, {b, nh_, t}, dev));
  RETURN_IF_ERROR(CheckTensor(dout, "attention output grad", dt, {b, t, c_}, dev));
  RETURN_IF_ERROR(CheckTensor(dqkv, "attention qkv grad", dt, {b, t, 3 * c_}, dev));
  ASSIGN_OR_RETURN(Buffer scratch, AllocateOnDevice(ctx, MemoryCategory::kWorkspace, DType::kF32,
                                                    kernels::AttentionBackwardScratchElements(b, t, nh_)));
  return kernels::AttentionBackward(ctx.kernels, dqkv.data, scratch.as<float>(), dout.data, qkv.data, out.data,
                                    lse.as<const float>(), b, t, c_, nh_, dt);
}

}  // namespace zeroshard
