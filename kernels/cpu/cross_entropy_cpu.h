// CPU fused softmax cross-entropy (contract in kernels/cross_entropy.h).
// Rows are spread over threads; each row is computed the same way at any
// thread count. Targets are validated by the caller (negative = ignored).
#ifndef ZEROSHARD_KERNELS_CPU_CROSS_ENTROPY_CPU_H_
#define ZEROSHARD_KERNELS_CPU_CROSS_ENTROPY_CPU_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"

namespace zeroshard::kernels::cpu {

absl::Status CrossEntropyForward(int threads, float* losses, float* lse, float* loss_sums, const void* logits,
                                 const int32_t* targets, int64_t rows, int64_t vocab, DType dtype);

absl::Status CrossEntropyBackward(int threads, void* dlogits, const void* logits, const float* lse,
                                  const int32_t* targets, float dloss, int64_t rows, int64_t vocab, DType dtype);

}  // namespace zeroshard::kernels::cpu

#endif  // ZEROSHARD_KERNELS_CPU_CROSS_ENTROPY_CPU_H_
