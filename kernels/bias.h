// Bias add and bias gradient over the rows of a (N,OC) matrix.
// Thread-count independent on CPU: each column is summed over rows in row order.
#ifndef ZEROSHARD_KERNELS_BIAS_H_
#define ZEROSHARD_KERNELS_BIAS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/context.h"

namespace zeroshard::kernels {

// out (N,OC) += bias (OC), every row.
absl::Status BiasAdd(const KernelContext& ctx, void* out, const void* bias, int64_t rows, int64_t cols, DType dtype);

// dbias (OC) += sum over rows of dout (N,OC). ACCUMULATES; the sum is formed
// in f32 and added to dbias once.
absl::Status BiasGrad(const KernelContext& ctx, void* dbias, const void* dout, int64_t rows, int64_t cols,
                      DType dtype);

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_BIAS_H_
