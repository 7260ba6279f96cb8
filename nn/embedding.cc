#include "nn/embedding.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/embedding.h"
#include "nn/tensor_checks.h"

namespace zeroshard {

absl::Status Embedding::CheckTokens(const ComputeContext& ctx, const TensorView& tokens) const {
  if (tokens.shape.size() != 2) return CheckTensor(tokens, "tokens", DType::kI32, {-1, -1}, ctx.kernels.device);
  RETURN_IF_ERROR(CheckTensor(tokens, "tokens", DType::kI32, tokens.shape, ctx.kernels.device));
  if (tokens.shape[1] > max_t_) {
    return absl::InvalidArgumentError(absl::StrCat("sequence length ", tokens.shape[1],
                                                   " exceeds the model's position table of ", max_t_));
  }
  return absl::OkStatus();
}

absl::Status Embedding::Forward(const ComputeContext& ctx, const TensorView& wte, const TensorView& wpe,
                                const TensorView& tokens, const TensorView& out) const {
  const DType dt = ctx.compute_dtype;
  const Device dev = ctx.kernels.device;
  RETURN_IF_ERROR(CheckTokens(ctx, tokens));
  const int64_t b = tokens.shape[0], t = tokens.shape[1];
  RETURN_IF_ERROR(CheckTensor(wte, "wte.weight", dt, {v_, c_}, dev));
  RETURN_IF_ERROR(CheckTensor(wpe, "wpe.weight", dt, {max_t_, c_}, dev));
  RETURN_IF_ERROR(CheckTensor(out, "embedding output", dt, {b, t, c_}, dev));
  return kernels::EmbeddingForward(ctx.kernels, out.data, tokens.as<const int32_t>(), wte.data, wpe.data, b, t, c_,
                                   v_, dt);
}

absl::Status Embedding::Backward(const ComputeContext& ctx, const TensorView& tokens, const TensorView& dout,
                                 const TensorView& dwte, const TensorView& dwpe) const {
  const DType dt = ctx.compute_dtype;
  const Device dev = ctx.kernels.device;
  RETURN_IF_ERROR(CheckTokens(ctx, tokens));
  const int64_t b = tokens.shape[0], t = tokens.shape[1];
  RETURN_IF_ERROR(CheckTensor(dout, "embedding output grad", dt, {b, t, c_}, dev));
  RETURN_IF_ERROR(CheckTensor(dwte, "wte.weight grad", dt, {v_, c_}, dev));
  RETURN_IF_ERROR(CheckTensor(dwpe, "wpe.weight grad", dt, {max_t_, c_}, dev));
  return kernels::EmbeddingBackward(ctx.kernels, dwte.data, dwpe.data, dout.data, tokens.as<const int32_t>(), b, t,
                                    c_, v_, dt);
}

}  // namespace zeroshard
