// The attention core of GPT-2's CausalSelfAttention, between c_attn and
// c_proj: split qkv into heads, softmax(q·k^T / sqrt(hs)) with a causal mask,
// times v, heads concatenated. B batch, T sequence, C channels, NH heads,
// hs = C / NH. qkv (B,T,3C) = [q | k | v]. What is saved for backward is
// each row's log-sum-exp lse (B,NH,T), f32, next to qkv and the output; the
// backward recomputes the probabilities (kernels/attention.h).
#ifndef ZEROSHARD_NN_CAUSAL_SELF_ATTENTION_H_
#define ZEROSHARD_NN_CAUSAL_SELF_ATTENTION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "nn/unit.h"

namespace zeroshard {

class CausalSelfAttention {
 public:
  // Precondition: channels % num_heads == 0 (BuildGpt2 validates it).
  CausalSelfAttention(int64_t channels, int64_t num_heads) : c_(channels), nh_(num_heads) {}

  // out (B,T,C) and lse (B,NH,T) WRITTEN.
  absl::Status Forward(const ComputeContext& ctx, const TensorView& qkv, const TensorView& out,
                       const TensorView& lse) const;

  // dqkv (B,T,3C) WRITTEN from the forward's qkv, out and lse. Uses B*NH*T
  // f32 of kWorkspace scratch.
  absl::Status Backward(const ComputeContext& ctx, const TensorView& qkv, const TensorView& out,
                        const TensorView& lse, const TensorView& dout, const TensorView& dqkv) const;

 private:
  int64_t c_;
  int64_t nh_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_NN_CAUSAL_SELF_ATTENTION_H_
