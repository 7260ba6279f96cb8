// Token + position embedding (GPT-2's wte and wpe).
//
// B batch, T sequence length (<= rows of wpe), C channels, V vocab.
#ifndef ZEROSHARD_KERNELS_EMBEDDING_H_
#define ZEROSHARD_KERNELS_EMBEDDING_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/context.h"

namespace zeroshard::kernels {

// out (B,T,C) = wte[tokens[b,t], :] + wpe[t, :]
// tokens (B,T) int32, wte (V,C), wpe (>=T, C); out, wte, wpe share dtype.
// On CPU a token outside [0, V) is kInvalidArgument naming it and its
// position (nothing is written for that row on). On CUDA tokens are not checked.
absl::Status EmbeddingForward(const KernelContext& ctx, void* out, const int32_t* tokens, const void* wte,
                              const void* wpe, int64_t batch, int64_t seq_len, int64_t channels, int64_t vocab,
                              DType dtype);

// dwte (V,C) += scatter of dout rows by token; dwpe (T,C) += sum over b of dout.
// Both ACCUMULATE. Deterministic: every output element adds its contributions
// in (b,t) order, on CPU (any thread count) and on CUDA alike. dwpe may be
// null (skip). dout (B,T,C). Tokens must be in [0, V): the CPU checks them
// as the forward does; CUDA does not (the data loaders check tokens against
// the vocabulary, data/token_file.h), and one out of range there writes
// outside dwte.
absl::Status EmbeddingBackward(const KernelContext& ctx, void* dwte, void* dwpe, const void* dout,
                               const int32_t* tokens, int64_t batch, int64_t seq_len, int64_t channels,
                               int64_t vocab, DType dtype);

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_EMBEDDING_H_
