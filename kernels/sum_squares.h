// Sum of squares, for the global gradient norm.
#ifndef ZEROSHARD_KERNELS_SUM_SQUARES_H_
#define ZEROSHARD_KERNELS_SUM_SQUARES_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/dtype.h"
#include "kernels/context.h"

namespace zeroshard::kernels {

// Chunk size of the fixed reduction tree: partial sums of consecutive
// kSumSquaresChunk elements (f64), then the partials added in order.
inline constexpr int64_t kSumSquaresChunk = 4096;

// *result (a HOST double) = sum of x[i]^2 over n elements of dtype, squared
// and accumulated in f64. CPU: bitwise identical for every thread count
// (fixed chunks, partials summed in order). CUDA synchronizes
// ctx.cuda_stream and needs ctx.cuda_workspace; its order differs from the
// CPU one (agrees within f64 rounding). n == 0 gives 0.
absl::Status SumOfSquares(const KernelContext& ctx, const void* x, int64_t n, DType dtype, double* result);

struct SumSquaresSpan {
  const void* x = nullptr;
  int64_t n = 0;
};

// results[i] (HOST doubles) = SumOfSquares of spans[i], each computed exactly
// as SumOfSquares does; on CUDA one read-back and one synchronisation for
// all of them (the gradient norm's only wait of the step).
absl::Status SumOfSquaresMany(const KernelContext& ctx, absl::Span<const SumSquaresSpan> spans, DType dtype,
                              double* results);

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_SUM_SQUARES_H_
