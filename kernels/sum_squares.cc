#include "kernels/sum_squares.h"

#include <vector>

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

namespace {

absl::Status CpuSumOfSquaresMany(int threads, absl::Span<const SumSquaresSpan> spans, DType dtype,
                                 double* results) {
  for (size_t i = 0; i < spans.size(); ++i) {
    results[i] = 0.0;
    if (spans[i].n > 0) RETURN_IF_ERROR(cpu::SumOfSquares(threads, spans[i].x, spans[i].n, dtype, &results[i]));
  }
  return absl::OkStatus();
}

#ifdef ZEROSHARD_HAS_CUDA
absl::Status CudaSumOfSquaresMany(const KernelContext& ctx, absl::Span<const SumSquaresSpan> spans, DType dtype,
                                  double* results) {
  std::vector<const void*> xs;
  std::vector<int64_t> ns;
  for (const SumSquaresSpan& s : spans) {
    xs.push_back(s.x);
    ns.push_back(s.n);
  }
  return cuda::SumOfSquaresMany(ctx, xs.data(), ns.data(), spans.size(), dtype, results);
}
#endif

}  // namespace

absl::Status SumOfSquaresMany(const KernelContext& ctx, absl::Span<const SumSquaresSpan> spans, DType dtype,
                              double* results) {
  RETURN_IF_ERROR(CheckComputeDType("SumOfSquaresMany", dtype));
  if (spans.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(CheckNotNull("SumOfSquaresMany", {{"results", results}}));
  for (const SumSquaresSpan& span : spans) {
    RETURN_IF_ERROR(CheckCount("SumOfSquaresMany", "n", span.n));
    if (span.n > 0) RETURN_IF_ERROR(CheckNotNull("SumOfSquaresMany", {{"x", span.x}}));
  }
  ZS_KERNEL_DISPATCH("SumOfSquaresMany", ctx, CpuSumOfSquaresMany(LoopThreads(ctx), spans, dtype, results),
                     CudaSumOfSquaresMany(ctx, spans, dtype, results));
}

}  // namespace zeroshard::kernels
