// Whether a GEMM operand is used as stored or transposed (kernels/gemm.h).
#ifndef ZEROSHARD_KERNELS_TRANSPOSE_H_
#define ZEROSHARD_KERNELS_TRANSPOSE_H_

#include <cstdint>

namespace zeroshard::kernels {

enum class Transpose : uint8_t { kNo, kYes };

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_TRANSPOSE_H_
