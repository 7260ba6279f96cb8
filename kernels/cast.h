// Element type conversion between f32, bf16 and f16 (round to nearest even,
// inf/NaN kept; see core/dtype.h). Same dtype in and out is a copy.
#ifndef ZEROSHARD_KERNELS_CAST_H_
#define ZEROSHARD_KERNELS_CAST_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/context.h"

namespace zeroshard::kernels {

// out (n, out_dtype) = in (n, in_dtype). in and out must not overlap unless
// identical with equal dtypes. kInvalidArgument for a non-float dtype.
absl::Status Cast(const KernelContext& ctx, void* out, DType out_dtype, const void* in, DType in_dtype, int64_t n);

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_CAST_H_
