// CPU blockwise int8 quantization (contract and packed format in
// kernels/quantize.h). Arguments arrive validated: n >= 1, block >= 1, packed
// 4-byte aligned.
#ifndef ZEROSHARD_KERNELS_CPU_QUANTIZE_CPU_H_
#define ZEROSHARD_KERNELS_CPU_QUANTIZE_CPU_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"

namespace zeroshard::kernels::cpu {

absl::Status QuantizeInt8Blocks(int threads, void* packed, const void* in, DType in_dtype, int64_t n, int64_t block,
                                bool reject_non_finite, float* residual);

absl::Status DequantizeInt8Blocks(int threads, void* out, DType out_dtype, const void* packed, int64_t n,
                                  int64_t block);

absl::Status DequantizeInt8BlocksAccumulate(int threads, float* acc, const void* packed, int64_t n, int64_t block);

}  // namespace zeroshard::kernels::cpu

#endif  // ZEROSHARD_KERNELS_CPU_QUANTIZE_CPU_H_
