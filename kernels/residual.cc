#include "kernels/residual.h"

#include "core/status_macros.h"
#include "kernels/checks.h"
#include "kernels/cpu/elementwise_cpu.h"
#include "kernels/cuda/launchers.h"

namespace zeroshard::kernels {

absl::Status ResidualForward(const KernelContext& ctx, void* out, const void* a, const void* b, int64_t n,
                             DType dtype) {
  RETURN_IF_ERROR(CheckCount("ResidualForward", "n", n));
  RETURN_IF_ERROR(CheckComputeDType("ResidualForward", dtype));
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckNotNull("ResidualForward", {{"out", out}, {"a", a}, {"b", b}}));
  ZS_KERNEL_DISPATCH("ResidualForward", ctx, cpu::ResidualForward(LoopThreads(ctx), out, a, b, n, dtype),
                     cuda::ResidualForward(ctx, out, a, b, n, dtype));
}

absl::Status AddInPlace(const KernelContext& ctx, void* y, const void* x, int64_t n, DType dtype) {
  RETURN_IF_ERROR(CheckCount("AddInPlace", "n", n));
  RETURN_IF_ERROR(CheckComputeDType("AddInPlace", dtype));
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckNotNull("AddInPlace", {{"y", y}, {"x", x}}));
  ZS_KERNEL_DISPATCH("AddInPlace", ctx, cpu::AddInPlace(LoopThreads(ctx), y, x, n, dtype),
                     cuda::ResidualForward(ctx, y, y, x, n, dtype));
}

}  // namespace zeroshard::kernels
