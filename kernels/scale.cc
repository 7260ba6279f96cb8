#include "kernels/scale.h"

#include "core/status_macros.h"
#include "kernels/checks.h"
#include "kernels/cpu/elementwise_cpu.h"
#include "kernels/cuda/launchers.h"

namespace zeroshard::kernels {

absl::Status ScaleInPlace(const KernelContext& ctx, void* x, int64_t n, DType dtype, float scale,
                          bool* found_nonfinite) {
  RETURN_IF_ERROR(CheckCount("ScaleInPlace", "n", n));
  RETURN_IF_ERROR(CheckComputeDType("ScaleInPlace", dtype));
  if (n == 0) {
    if (found_nonfinite != nullptr) *found_nonfinite = false;
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(CheckNotNull("ScaleInPlace", {{"x", x}}));
  ZS_KERNEL_DISPATCH("ScaleInPlace", ctx, cpu::ScaleInPlace(LoopThreads(ctx), x, n, dtype, scale, found_nonfinite),
                     cuda::ScaleInPlace(ctx, x, n, dtype, scale, found_nonfinite));
}

}  // namespace zeroshard::kernels
