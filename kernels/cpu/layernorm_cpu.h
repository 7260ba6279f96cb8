// CPU LayerNorm kernels (contract in kernels/layernorm.h). Rows are spread
// over threads for the row-wise parts; dweight/dbias are reduced per column
// in row order, so results do not depend on the thread count.
#ifndef ZEROSHARD_KERNELS_CPU_LAYERNORM_CPU_H_
#define ZEROSHARD_KERNELS_CPU_LAYERNORM_CPU_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"

namespace zeroshard::kernels::cpu {

absl::Status LayerNormForward(int threads, void* out, float* mean, float* rstd, const void* inp, const void* weight,
                              const void* bias, int64_t rows, int64_t channels, float eps, DType dtype);

absl::Status LayerNormBackward(int threads, void* dinp, void* dweight, void* dbias, const void* dout,
                               const void* inp, const void* weight, const float* mean, const float* rstd,
                               int64_t rows, int64_t channels, DType dtype);

}  // namespace zeroshard::kernels::cpu

#endif  // ZEROSHARD_KERNELS_CPU_LAYERNORM_CPU_H_
