// Widening accumulation into f32 (gradients or partial sums kept in bf16/f16
// added into f32 buffers).
#ifndef ZEROSHARD_KERNELS_ACCUMULATE_H_
#define ZEROSHARD_KERNELS_ACCUMULATE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/context.h"

namespace zeroshard::kernels {

// dst (n, f32) += float(src (n, src_dtype)) for src_dtype f32, bf16 or f16.
// Widening is exact, so each element is rounded once (by the f32 add) and the
// result is the same on CPU, CUDA and at any thread count; inf and NaN
// propagate. src and dst must not overlap unless identical (f32). n may be 0
// (then the pointers may be null). kInvalidArgument for n < 0, a non-float
// src_dtype, or a null pointer with n > 0.
absl::Status AccumulateInto(const KernelContext& ctx, float* dst, const void* src, DType src_dtype, int64_t n);

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_ACCUMULATE_H_
