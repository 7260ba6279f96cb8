// Causal multi-head self-attention on the fused qkv of GPT-2's c_attn.
//
// B batch, T sequence length, C channels, NH heads, hs = C / NH.
// qkv (B,T,3C) holds [q | k | v] along the last dimension; head h uses
// channels [h*hs, (h+1)*hs) of each of q, k, v. out (B,T,C) puts head h in
// channels [h*hs, (h+1)*hs) (ready for c_proj). att (B,NH,T,T) is f32.
// Scores are scaled by 1/sqrt(hs); position t attends to positions <= t.
//
// CPU: per (b, h) GEMMs through OpenBLAS on strided views (no copies in f32),
// (b, h) pairs spread over the loop threads; each (b, h) is computed the same
// way at any thread count, so results are thread-count independent.
#ifndef ZEROSHARD_KERNELS_ATTENTION_H_
#define ZEROSHARD_KERNELS_ATTENTION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/context.h"

namespace zeroshard::kernels {

// out (B,T,C) WRITTEN; att (B,NH,T,T) WRITTEN with the softmax probabilities,
// exactly 0 above the diagonal (saved for backward). C % NH must be 0.
absl::Status AttentionForward(const KernelContext& ctx, void* out, float* att, const void* qkv, int64_t batch,
                              int64_t seq_len, int64_t channels, int64_t num_heads, DType dtype);

// dqkv (B,T,3C) WRITTEN from dout (B,T,C), the forward's qkv and att.
// scratch is f32 workspace of B*NH*T*T elements (contents are clobbered).
absl::Status AttentionBackward(const KernelContext& ctx, void* dqkv, float* scratch, const void* dout,
                               const void* qkv, const float* att, int64_t batch, int64_t seq_len, int64_t channels,
                               int64_t num_heads, DType dtype);

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_ATTENTION_H_
