#include "kernels/embedding.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/checks.h"
#include "kernels/cpu/embedding_cpu.h"
#include "kernels/cuda/launchers.h"

namespace zeroshard::kernels {
namespace {

absl::Status CheckTokens(const char* kernel, const int32_t* tokens, int64_t batch, int64_t seq_len, int64_t vocab) {
  for (int64_t r = 0; r < batch * seq_len; ++r) {
    if (tokens[r] < 0 || tokens[r] >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat(kernel, ": tokens[", r / seq_len, ", ", r % seq_len,
                                                     "] = ", tokens[r], ", expected in [0, ", vocab, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckEmbedding(const char* kernel, int64_t batch, int64_t seq_len, int64_t channels, int64_t vocab,
                            DType dtype) {
  RETURN_IF_ERROR(
      CheckDims(kernel, {{"batch", batch}, {"seq_len", seq_len}, {"channels", channels}, {"vocab", vocab}}));
  RETURN_IF_ERROR(CheckFitsInt32(kernel, {{"vocab", vocab}}));
  return CheckComputeDType(kernel, dtype);
}

}  // namespace

absl::Status EmbeddingForward(const KernelContext& ctx, void* out, const int32_t* tokens, const void* wte,
                              const void* wpe, int64_t batch, int64_t seq_len, int64_t channels, int64_t vocab,
                              DType dtype) {
  RETURN_IF_ERROR(CheckEmbedding("EmbeddingForward", batch, seq_len, channels, vocab, dtype));
  RETURN_IF_ERROR(CheckNotNull("EmbeddingForward", {{"out", out}, {"tokens", tokens}, {"wte", wte}, {"wpe", wpe}}));
  if (ctx.device == Device::kCpu) RETURN_IF_ERROR(CheckTokens("EmbeddingForward", tokens, batch, seq_len, vocab));
  ZS_KERNEL_DISPATCH(
      "EmbeddingForward", ctx,
      cpu::EmbeddingForward(LoopThreads(ctx), out, tokens, wte, wpe, batch, seq_len, channels, dtype),
      cuda::EmbeddingForward(ctx, out, tokens, wte, wpe, batch, seq_len, channels, dtype));
}

absl::Status EmbeddingBackward(const KernelContext& ctx, void* dwte, void* dwpe, const void* dout,
                               const int32_t* tokens, int64_t batch, int64_t seq_len, int64_t channels,
                               int64_t vocab, DType dtype) {
  RETURN_IF_ERROR(CheckEmbedding("EmbeddingBackward", batch, seq_len, channels, vocab, dtype));
  RETURN_IF_ERROR(CheckNotNull("EmbeddingBackward", {{"dwte", dwte}, {"dout", dout}, {"tokens", tokens}}));
  if (ctx.device == Device::kCpu) RETURN_IF_ERROR(CheckTokens("EmbeddingBackward", tokens, batch, seq_len, vocab));
  ZS_KERNEL_DISPATCH(
      "EmbeddingBackward", ctx,
      cpu::EmbeddingBackward(LoopThreads(ctx), dwte, dwpe, dout, tokens, batch, seq_len, channels, vocab, dtype),
      cuda::EmbeddingBackward(ctx, dwte, dwpe, dout, tokens, batch, seq_len, channels, vocab, dtype));
}

}  // namespace zeroshard::kernels
