// CUDA launchers of the vocabulary-parallel kernels in
// kernels/vocab_parallel.h (the range is begin, local, valid). Defined by
// vocab_parallel.cu in //kernels/cuda:vocab_parallel_kernels, which exists
// only when the build has CUDA (ZEROSHARD_HAS_CUDA).
#ifndef ZEROSHARD_KERNELS_CUDA_VOCAB_PARALLEL_LAUNCHERS_H_
#define ZEROSHARD_KERNELS_CUDA_VOCAB_PARALLEL_LAUNCHERS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/context.h"

namespace zeroshard::kernels::cuda {

absl::Status EmbeddingForwardVocabRange(const KernelContext& ctx, void* out, const int32_t* tokens,
                                        const void* wte_local, const void* wpe, int64_t batch, int64_t seq_len,
                                        int64_t channels, int64_t begin, int64_t local, int64_t valid, DType dtype);
absl::Status EmbeddingBackwardVocabRange(const KernelContext& ctx, void* dwte_local, void* dwpe, const void* dout,
                                         const int32_t* tokens, int64_t batch, int64_t seq_len, int64_t channels,
                                         int64_t begin, int64_t local, int64_t valid, DType dtype);
absl::Status VocabParallelRowMax(const KernelContext& ctx, float* row_max, const void* logits_local, int64_t rows,
                                 int64_t local, int64_t valid, DType dtype);
absl::Status VocabParallelSumExpAndTarget(const KernelContext& ctx, float* sums, const void* logits_local,
                                          const float* row_max, const int32_t* targets, int64_t rows, int64_t begin,
                                          int64_t local, int64_t valid, DType dtype);
absl::Status VocabParallelLoss(const KernelContext& ctx, float* losses, float* lse, float* loss_sums,
                               const float* row_max, const float* sums, const int32_t* targets, int64_t rows);
absl::Status VocabParallelCrossEntropyBackward(const KernelContext& ctx, void* dlogits_local,
                                               const void* logits_local, const float* lse, const int32_t* targets,
                                               float dloss, int64_t rows, int64_t begin, int64_t local,
                                               int64_t valid, DType dtype);

}  // namespace zeroshard::kernels::cuda

#endif  // ZEROSHARD_KERNELS_CUDA_VOCAB_PARALLEL_LAUNCHERS_H_
