#include "kernels/cross_entropy.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/checks.h"
#include "kernels/cpu/cross_entropy_cpu.h"
#include "kernels/cuda/launchers.h"

namespace zeroshard::kernels {
namespace {

absl::Status CheckTargets(const char* kernel, const int32_t* targets, int64_t rows, int64_t vocab) {
  for (int64_t r = 0; r < rows; ++r) {
    if (targets[r] >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat(kernel, ": targets[", r, "] = ", targets[r], ", expected in [0, ",
                                                     vocab, ") or negative (ignored)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CrossEntropyForward(const KernelContext& ctx, float* losses, float* lse, float* loss_sums,
                                 const void* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                                 DType dtype) {
  RETURN_IF_ERROR(CheckDims("CrossEntropyForward", {{"rows", rows}, {"vocab", vocab}}));
  RETURN_IF_ERROR(CheckFitsInt32("CrossEntropyForward", {{"vocab", vocab}}));
  RETURN_IF_ERROR(CheckNotNull("CrossEntropyForward",
                               {{"losses", losses}, {"lse", lse}, {"logits", logits}, {"targets", targets}}));
  RETURN_IF_ERROR(CheckComputeDType("CrossEntropyForward", dtype));
  if (ctx.device == Device::kCpu) RETURN_IF_ERROR(CheckTargets("CrossEntropyForward", targets, rows, vocab));
  ZS_KERNEL_DISPATCH(
      "CrossEntropyForward", ctx,
      cpu::CrossEntropyForward(LoopThreads(ctx), losses, lse, loss_sums, logits, targets, rows, vocab, dtype),
      cuda::CrossEntropyForward(ctx, losses, lse, loss_sums, logits, targets, rows, vocab, dtype));
}

absl::Status CrossEntropyBackward(const KernelContext& ctx, void* dlogits, const void* logits, const float* lse,
                                  const int32_t* targets, float dloss, int64_t rows, int64_t vocab, DType dtype) {
  RETURN_IF_ERROR(CheckDims("CrossEntropyBackward", {{"rows", rows}, {"vocab", vocab}}));
  RETURN_IF_ERROR(CheckFitsInt32("CrossEntropyBackward", {{"vocab", vocab}}));
  RETURN_IF_ERROR(CheckNotNull("CrossEntropyBackward",
                               {{"dlogits", dlogits}, {"logits", logits}, {"lse", lse}, {"targets", targets}}));
  RETURN_IF_ERROR(CheckComputeDType("CrossEntropyBackward", dtype));
  if (ctx.device == Device::kCpu) RETURN_IF_ERROR(CheckTargets("CrossEntropyBackward", targets, rows, vocab));
  ZS_KERNEL_DISPATCH(
      "CrossEntropyBackward", ctx,
      cpu::CrossEntropyBackward(LoopThreads(ctx), dlogits, logits, lse, targets, dloss, rows, vocab, dtype),
      cuda::CrossEntropyBackward(ctx, dlogits, logits, lse, targets, dloss, rows, vocab, dtype));
}

}  // namespace zeroshard::kernels
