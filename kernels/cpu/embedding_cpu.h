// CPU embedding kernels (contract in kernels/embedding.h); tokens are
// validated by the caller.
#ifndef ZEROSHARD_KERNELS_CPU_EMBEDDING_CPU_H_
#define ZEROSHARD_KERNELS_CPU_EMBEDDING_CPU_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"

namespace zeroshard::kernels::cpu {

absl::Status EmbeddingForward(int threads, void* out, const int32_t* tokens, const void* wte, const void* wpe,
                              int64_t batch, int64_t seq_len, int64_t channels, DType dtype);

// Deterministic scatter-add: positions are grouped by token with a stable
// counting sort (so each token's positions stay in (b,t) order), each token
// row's contributions are summed in f32 in that order and added to dwte
// once; token rows are spread over threads. dwpe likewise per position t.
absl::Status EmbeddingBackward(int threads, void* dwte, void* dwpe, const void* dout, const int32_t* tokens,
                               int64_t batch, int64_t seq_len, int64_t channels, int64_t vocab, DType dtype);

}  // namespace zeroshard::kernels::cpu

#endif  // ZEROSHARD_KERNELS_CPU_EMBEDDING_CPU_H_
