// Scaling in place with inf/NaN detection (gradient unscaling for f16 loss
// scaling, gradient clipping).
#ifndef ZEROSHARD_KERNELS_SCALE_H_
#define ZEROSHARD_KERNELS_SCALE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/context.h"

namespace zeroshard::kernels {

// x (n) *= scale, then *found_nonfinite (a HOST bool) = whether any result is
// inf or NaN (so inputs that were non-finite, and overflow, are both seen).
// Every element is scaled even when a non-finite one is found.
// On CUDA this synchronizes ctx.cuda_stream to return the flag and needs
// ctx.cuda_workspace. found_nonfinite == nullptr: no check, and on CUDA no
// synchronisation (the scaling is stream-ordered like any kernel).
absl::Status ScaleInPlace(const KernelContext& ctx, void* x, int64_t n, DType dtype, float scale,
                          bool* found_nonfinite);

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_SCALE_H_
