// CPU vocabulary-parallel embedding and cross-entropy pieces (contract in
// kernels/vocab_parallel.h; the range is begin, local, valid). Tokens and
// targets are validated by the caller.
#ifndef ZEROSHARD_KERNELS_CPU_VOCAB_PARALLEL_CPU_H_
#define ZEROSHARD_KERNELS_CPU_VOCAB_PARALLEL_CPU_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"

namespace zeroshard::kernels::cpu {

absl::Status EmbeddingForwardVocabRange(int threads, void* out, const int32_t* tokens, const void* wte_local,
                                        const void* wpe, int64_t batch, int64_t seq_len, int64_t channels,
                                        int64_t begin, int64_t local, int64_t valid, DType dtype);

// The stable counting sort of EmbeddingBackward over the range's rows only.
absl::Status EmbeddingBackwardVocabRange(int threads, void* dwte_local, void* dwpe, const void* dout,
                                         const int32_t* tokens, int64_t batch, int64_t seq_len, int64_t channels,
                                         int64_t begin, int64_t local, int64_t valid, DType dtype);

absl::Status VocabParallelRowMax(int threads, float* row_max, const void* logits_local, int64_t rows, int64_t local,
                                 int64_t valid, DType dtype);

absl::Status VocabParallelSumExpAndTarget(int threads, float* sums, const void* logits_local, const float* row_max,
                                          const int32_t* targets, int64_t rows, int64_t begin, int64_t local,
                                          int64_t valid, DType dtype);

absl::Status VocabParallelLoss(int threads, float* losses, float* lse, float* loss_sums, const float* row_max,
                               const float* sums, const int32_t* targets, int64_t rows);

absl::Status VocabParallelCrossEntropyBackward(int threads, void* dlogits_local, const void* logits_local,
                                               const float* lse, const int32_t* targets, float dloss, int64_t rows,
                                               int64_t begin, int64_t local, int64_t valid, DType dtype);

}  // namespace zeroshard::kernels::cpu

#endif  // ZEROSHARD_KERNELS_CPU_VOCAB_PARALLEL_CPU_H_
