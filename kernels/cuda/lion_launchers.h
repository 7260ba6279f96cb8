// CUDA launcher of the Lion update in kernels/lion.h. Defined by lion.cu in
// //kernels/cuda:lion_kernels, which exists only when the build has CUDA
// (ZEROSHARD_HAS_CUDA).
#ifndef ZEROSHARD_KERNELS_CUDA_LION_LAUNCHERS_H_
#define ZEROSHARD_KERNELS_CUDA_LION_LAUNCHERS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/context.h"
#include "kernels/lion_math.h"

namespace zeroshard::kernels::cuda {

absl::Status LionUpdate(const KernelContext& ctx, float* param, const float* grad, float* exp_avg, int64_t n,
                        const LionScalars& s);

}  // namespace zeroshard::kernels::cuda

#endif  // ZEROSHARD_KERNELS_CUDA_LION_LAUNCHERS_H_
