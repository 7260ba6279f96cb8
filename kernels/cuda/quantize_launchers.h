// CUDA launchers of the int8 block quantization in kernels/quantize.h.
// Defined by quantize.cu in //kernels/cuda:quantize_kernels, which exists
// only when the build has CUDA (ZEROSHARD_HAS_CUDA).
#ifndef ZEROSHARD_KERNELS_CUDA_QUANTIZE_LAUNCHERS_H_
#define ZEROSHARD_KERNELS_CUDA_QUANTIZE_LAUNCHERS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/context.h"

namespace zeroshard::kernels::cuda {

// reject_non_finite (kReject) synchronizes ctx.cuda_stream and needs
// ctx.cuda_workspace; otherwise only launches.
absl::Status QuantizeInt8Blocks(const KernelContext& ctx, void* packed, const void* in, DType in_dtype, int64_t n,
                                int64_t block, bool reject_non_finite, float* residual);
absl::Status DequantizeInt8Blocks(const KernelContext& ctx, void* out, DType out_dtype, const void* packed, int64_t n,
                                  int64_t block);
absl::Status DequantizeInt8BlocksAccumulate(const KernelContext& ctx, float* acc, const void* packed, int64_t n,
                                            int64_t block);

}  // namespace zeroshard::kernels::cuda

#endif  // ZEROSHARD_KERNELS_CUDA_QUANTIZE_LAUNCHERS_H_
