// CPU Linear and bias kernels (contracts in kernels/linear.h, kernels/bias.h).
// Arguments are already validated.
#ifndef ZEROSHARD_KERNELS_CPU_LINEAR_CPU_H_
#define ZEROSHARD_KERNELS_CPU_LINEAR_CPU_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"

namespace zeroshard::kernels::cpu {

absl::Status LinearForward(int threads, void* out, const void* inp, const void* weight, const void* bias,
                           int64_t rows, int64_t in_features, int64_t out_features, DType dtype);
absl::Status LinearBackward(int threads, void* dinp, void* dweight, void* dbias, const void* dout, const void* inp,
                            const void* weight, int64_t rows, int64_t in_features, int64_t out_features,
                            DType dtype);

absl::Status BiasAdd(int threads, void* out, const void* bias, int64_t rows, int64_t cols, DType dtype);
absl::Status BiasGrad(int threads, void* dbias, const void* dout, int64_t rows, int64_t cols, DType dtype);

// f32 column sums: sums[c] = sum over rows of m[r, c] in row order (each
// column's order is the same at any thread count).
void ColumnSums(int threads, const float* m, int64_t rows, int64_t cols, float* sums);

}  // namespace zeroshard::kernels::cpu

#endif  // ZEROSHARD_KERNELS_CPU_LINEAR_CPU_H_
