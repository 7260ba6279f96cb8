#include "kernels/sum_squares.h"

#include "core/status_macros.h"
#include "kernels/checks.h"
#include "kernels/cpu/elementwise_cpu.h"
#include "kernels/cuda/launchers.h"

namespace zeroshard::kernels {

static_assert(kSumSquaresChunk == cpu::kSumOfSquaresChunk, "documented chunk differs from the CPU one");

absl::Status SumOfSquares(const KernelContext& ctx, const void* x, int64_t n, DType dtype, double* result) {
  RETURN_IF_ERROR(CheckCount("SumOfSquares", "n", n));
  RETURN_IF_ERROR(CheckComputeDType("SumOfSquares", dtype));
  RETURN_IF_ERROR(CheckNotNull("SumOfSquares", {{"result", result}}));
  if (n == 0) {
    *result = 0.0;
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(CheckNotNull("SumOfSquares", {{"x", x}}));
  ZS_KERNEL_DISPATCH("SumOfSquares", ctx, cpu::SumOfSquares(LoopThreads(ctx), x, n, dtype, result),
                     cuda::SumOfSquares(ctx, x, n, dtype, result));
}

}  // namespace zeroshard::kernels
