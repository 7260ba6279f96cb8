// Residual connection and gradient accumulation, element-wise.
// The residual's backward is the identity: both inputs receive dout.
#ifndef ZEROSHARD_KERNELS_RESIDUAL_H_
#define ZEROSHARD_KERNELS_RESIDUAL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/context.h"

namespace zeroshard::kernels {

// out (n) = a + b. out may alias a or b.
absl::Status ResidualForward(const KernelContext& ctx, void* out, const void* a, const void* b, int64_t n,
                             DType dtype);

// y (n) += x. For summing gradients that meet at a residual fork.
absl::Status AddInPlace(const KernelContext& ctx, void* y, const void* x, int64_t n, DType dtype);

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_RESIDUAL_H_
