#include "kernels/vocab_parallel.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/checks.h"
#include "kernels/cpu/vocab_parallel_cpu.h"
#include "kernels/cuda/vocab_parallel_launchers.h"

namespace zeroshard::kernels {
namespace {

absl::Status CheckRange(const char* kernel, VocabRange range) {
  if (range.begin < 0 || range.local < 1 || range.valid < 0 || range.valid > range.local) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": vocabulary range begin ", range.begin, ", local ",
                                                   range.local, ", valid ", range.valid,
                                                   ", expected begin >= 0, local >= 1 and 0 <= valid <= local"));
  }
  return CheckFitsInt32(kernel, {{"vocab range end", range.begin + range.local}});
}

absl::Status CheckTokens(const char* kernel, const int32_t* tokens, int64_t batch, int64_t seq_len, int64_t vocab) {
  for (int64_t r = 0; r < batch * seq_len; ++r) {
    if (tokens[r] < 0 || tokens[r] >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat(kernel, ": tokens[", r / seq_len, ", ", r % seq_len,
                                                     "] = ", tokens[r], ", expected in [0, ", vocab, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckTargets(const char* kernel, const int32_t* targets, int64_t rows, int64_t vocab) {
  for (int64_t r = 0; r < rows; ++r) {
    if (targets[r] >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat(kernel, ": targets[", r, "] = ", targets[r], ", expected in [0, ",
                                                     vocab, ") or negative (ignored)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckEmbedding(const char* kernel, int64_t batch, int64_t seq_len, int64_t channels, VocabRange range,
                            int64_t vocab, DType dtype) {
  RETURN_IF_ERROR(
      CheckDims(kernel, {{"batch", batch}, {"seq_len", seq_len}, {"channels", channels}, {"vocab", vocab}}));
  RETURN_IF_ERROR(CheckRange(kernel, range));
  return CheckComputeDType(kernel, dtype);
}

}  // namespace

absl::Status EmbeddingForwardVocabRange(const KernelContext& ctx, void* out, const int32_t* tokens,
                                        const void* wte_local, const void* wpe, int64_t batch, int64_t seq_len,
                                        int64_t channels, VocabRange range, int64_t vocab, DType dtype) {
  constexpr const char* kKernel = "EmbeddingForwardVocabRange";
  RETURN_IF_ERROR(CheckEmbedding(kKernel, batch, seq_len, channels, range, vocab, dtype));
  RETURN_IF_ERROR(CheckNotNull(kKernel, {{"out", out}, {"tokens", tokens}, {"wte_local", wte_local}, {"wpe", wpe}}));
  if (ctx.device == Device::kCpu) RETURN_IF_ERROR(CheckTokens(kKernel, tokens, batch, seq_len, vocab));
  ZS_KERNEL_DISPATCH(kKernel, ctx,
                     cpu::EmbeddingForwardVocabRange(LoopThreads(ctx), out, tokens, wte_local, wpe, batch, seq_len,
                                                     channels, range.begin, range.local, range.valid, dtype),
                     cuda::EmbeddingForwardVocabRange(ctx, out, tokens, wte_local, wpe, batch, seq_len, channels,
                                                      range.begin, range.local, range.valid, dtype));
}

absl::Status EmbeddingBackwardVocabRange(const KernelContext& ctx, void* dwte_local, void* dwpe, const void* dout,
                                         const int32_t* tokens, int64_t batch, int64_t seq_len, int64_t channels,
                                         VocabRange range, int64_t vocab, DType dtype) {
  constexpr const char* kKernel = "EmbeddingBackwardVocabRange";
  RETURN_IF_ERROR(CheckEmbedding(kKernel, batch, seq_len, channels, range, vocab, dtype));
  RETURN_IF_ERROR(CheckNotNull(kKernel, {{"dwte_local", dwte_local}, {"dout", dout}, {"tokens", tokens}}));
  if (ctx.device == Device::kCpu) RETURN_IF_ERROR(CheckTokens(kKernel, tokens, batch, seq_len, vocab));
  ZS_KERNEL_DISPATCH(kKernel, ctx,
                     cpu::EmbeddingBackwardVocabRange(LoopThreads(ctx), dwte_local, dwpe, dout, tokens, batch,
                                                      seq_len, channels, range.begin, range.local, range.valid, dtype),
                     cuda::EmbeddingBackwardVocabRange(ctx, dwte_local, dwpe, dout, tokens, batch, seq_len, channels,
                                                       range.begin, range.local, range.valid, dtype));
}

absl::Status VocabParallelRowMax(const KernelContext& ctx, float* row_max, const void* logits_local, int64_t rows,
                                 VocabRange range, DType dtype) {
  constexpr const char* kKernel = "VocabParallelRowMax";
  RETURN_IF_ERROR(CheckDims(kKernel, {{"rows", rows}}));
  RETURN_IF_ERROR(CheckRange(kKernel, range));
  RETURN_IF_ERROR(CheckComputeDType(kKernel, dtype));
  RETURN_IF_ERROR(CheckNotNull(kKernel, {{"row_max", row_max}, {"logits_local", logits_local}}));
  ZS_KERNEL_DISPATCH(
      kKernel, ctx,
      cpu::VocabParallelRowMax(LoopThreads(ctx), row_max, logits_local, rows, range.local, range.valid, dtype),
      cuda::VocabParallelRowMax(ctx, row_max, logits_local, rows, range.local, range.valid, dtype));
}

absl::Status VocabParallelSumExpAndTarget(const KernelContext& ctx, float* sums, const void* logits_local,
                                          const float* row_max, const int32_t* targets, int64_t rows,
                                          VocabRange range, int64_t vocab, DType dtype) {
  constexpr const char* kKernel = "VocabParallelSumExpAndTarget";
  RETURN_IF_ERROR(CheckDims(kKernel, {{"rows", rows}, {"vocab", vocab}}));
  RETURN_IF_ERROR(CheckRange(kKernel, range));
  RETURN_IF_ERROR(CheckComputeDType(kKernel, dtype));
  RETURN_IF_ERROR(CheckNotNull(
      kKernel, {{"sums", sums}, {"logits_local", logits_local}, {"row_max", row_max}, {"targets", targets}}));
  if (ctx.device == Device::kCpu) RETURN_IF_ERROR(CheckTargets(kKernel, targets, rows, vocab));
  ZS_KERNEL_DISPATCH(kKernel, ctx,
                     cpu::VocabParallelSumExpAndTarget(LoopThreads(ctx), sums, logits_local, row_max, targets, rows,
                                                       range.begin, range.local, range.valid, dtype),
                     cuda::VocabParallelSumExpAndTarget(ctx, sums, logits_local, row_max, targets, rows, range.begin,
                                                        range.local, range.valid, dtype));
}

absl::Status VocabParallelLoss(const KernelContext& ctx, float* losses, float* lse, float* loss_sums,
                               const float* row_max, const float* sums, const int32_t* targets, int64_t rows) {
  constexpr const char* kKernel = "VocabParallelLoss";
  RETURN_IF_ERROR(CheckDims(kKernel, {{"rows", rows}}));
  RETURN_IF_ERROR(CheckNotNull(
      kKernel, {{"losses", losses}, {"lse", lse}, {"row_max", row_max}, {"sums", sums}, {"targets", targets}}));
  ZS_KERNEL_DISPATCH(kKernel, ctx,
                     cpu::VocabParallelLoss(LoopThreads(ctx), losses, lse, loss_sums, row_max, sums, targets, rows),
                     cuda::VocabParallelLoss(ctx, losses, lse, loss_sums, row_max, sums, targets, rows));
}

absl::Status VocabParallelCrossEntropyBackward(const KernelContext& ctx, void* dlogits_local,
                                               const void* logits_local, const float* lse, const int32_t* targets,
                                               float dloss, int64_t rows, VocabRange range, DType dtype) {
  constexpr const char* kKernel = "VocabParallelCrossEntropyBackward";
  RETURN_IF_ERROR(CheckDims(kKernel, {{"rows", rows}}));
  RETURN_IF_ERROR(CheckRange(kKernel, range));
  RETURN_IF_ERROR(CheckComputeDType(kKernel, dtype));
  RETURN_IF_ERROR(CheckNotNull(
      kKernel, {{"dlogits_local", dlogits_local}, {"logits_local", logits_local}, {"lse", lse}, {"targets", targets}}));
  ZS_KERNEL_DISPATCH(kKernel, ctx,
                     cpu::VocabParallelCrossEntropyBackward(LoopThreads(ctx), dlogits_local, logits_local, lse,
                                                            targets, dloss, rows, range.begin, range.local,
                                                            range.valid, dtype),
                     cuda::VocabParallelCrossEntropyBackward(ctx, dlogits_local, logits_local, lse, targets, dloss,
                                                             rows, range.begin, range.local, range.valid, dtype));
}

}  // namespace zeroshard::kernels
