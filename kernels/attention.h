// Causal multi-head self-attention on the fused qkv of GPT-2's c_attn.
//
// B batch, T sequence length, C channels, NH heads, hs = C / NH.
// qkv (B,T,3C) holds [q | k | v] along the last dimension; head h uses
// channels [h*hs, (h+1)*hs) of each of q, k, v. out (B,T,C) puts head h in
// channels [h*hs, (h+1)*hs) (ready for c_proj). Scores are scaled by
// 1/sqrt(hs); position t attends to positions <= t.
//
// What the forward saves for backward is lse (B,NH,T), f32: each row's
// log-sum-exp of its scaled scores. The backward recomputes the
// probabilities as exp(score - lse), so no T × T tensor outlives a call.
//
// CPU: per (b, h) GEMMs through OpenBLAS on strided views (no copies in f32)
// with the head's T × T scores in a per-thread buffer, (b, h) pairs spread
// over the loop threads; each (b, h) is computed the same way at any thread
// count, so results are thread-count independent.
// CUDA: tiled online-softmax kernels (kernels/attention_tiles.h) for head
// sizes up to 128; nothing T × T is materialised, in registers or memory.
#ifndef ZEROSHARD_KERNELS_ATTENTION_H_
#define ZEROSHARD_KERNELS_ATTENTION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/context.h"

namespace zeroshard::kernels {

// out (B,T,C) and lse (B,NH,T) WRITTEN. C % NH must be 0.
absl::Status AttentionForward(const KernelContext& ctx, void* out, float* lse, const void* qkv, int64_t batch,
                              int64_t seq_len, int64_t channels, int64_t num_heads, DType dtype);

// Elements of f32 scratch AttentionBackward needs: B*NH*T (one value per row).
inline int64_t AttentionBackwardScratchElements(int64_t batch, int64_t seq_len, int64_t num_heads) {
  return batch * num_heads * seq_len;
}

// dqkv (B,T,3C) WRITTEN from dout (B,T,C) and the forward's qkv, out and lse.
// scratch (AttentionBackwardScratchElements, contents clobbered) holds each
// row's dout · out on CUDA; the CPU takes the same sum from the recomputed
// probabilities instead and reads neither out nor scratch.
absl::Status AttentionBackward(const KernelContext& ctx, void* dqkv, float* scratch, const void* dout,
                               const void* qkv, const void* out, const float* lse, int64_t batch, int64_t seq_len,
                               int64_t channels, int64_t num_heads, DType dtype);

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_ATTENTION_H_
