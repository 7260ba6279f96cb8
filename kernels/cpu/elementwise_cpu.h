// CPU element-wise kernels: GELU, residual, cast, widening accumulation,
// scale, sum of squares (contracts in the matching kernels/*.h). Arguments are already validated.
// Every kernel here is thread-count independent: outputs are partitioned by
// element, and SumOfSquares reduces fixed chunks whose partials are added in
// order.
#ifndef ZEROSHARD_KERNELS_CPU_ELEMENTWISE_CPU_H_
#define ZEROSHARD_KERNELS_CPU_ELEMENTWISE_CPU_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"

namespace zeroshard::kernels::cpu {

absl::Status GeluForward(int threads, void* out, const void* inp, int64_t n, DType dtype);
absl::Status GeluBackward(int threads, void* dinp, const void* inp, const void* dout, int64_t n, DType dtype);

absl::Status ResidualForward(int threads, void* out, const void* a, const void* b, int64_t n, DType dtype);
absl::Status AddInPlace(int threads, void* y, const void* x, int64_t n, DType dtype);

absl::Status Cast(int threads, void* out, DType out_dtype, const void* in, DType in_dtype, int64_t n);

absl::Status AccumulateInto(int threads, float* dst, const void* src, DType src_dtype, int64_t n);

// Fixed chunk of SumOfSquares (kernels/sum_squares.h documents it).
inline constexpr int64_t kSumOfSquaresChunk = 4096;

absl::Status ScaleInPlace(int threads, void* x, int64_t n, DType dtype, float scale, bool* found_nonfinite);
absl::Status SumOfSquares(int threads, const void* x, int64_t n, DType dtype, double* result);

}  // namespace zeroshard::kernels::cpu

#endif  // ZEROSHARD_KERNELS_CPU_ELEMENTWISE_CPU_H_
