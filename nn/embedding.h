// GPT-2's input embedding: token embedding wte (V,C) plus learned position
// embedding wpe (max_T,C). B batch, T <= max_T sequence length.
#ifndef ZEROSHARD_NN_EMBEDDING_H_
#define ZEROSHARD_NN_EMBEDDING_H_

#include <cstdint>

#include "absl/status/status.h"
#include "nn/unit.h"

namespace zeroshard {

class Embedding {
 public:
  Embedding(int64_t vocab_size, int64_t max_seq_len, int64_t channels)
      : v_(vocab_size), max_t_(max_seq_len), c_(channels) {}

  // out (B,T,C) WRITTEN = wte[tokens[b,t]] + wpe[t]; tokens (B,T) i32.
  // kInvalidArgument when T > max_T, or (on CPU) a token is outside [0, V).
  absl::Status Forward(const ComputeContext& ctx, const TensorView& wte, const TensorView& wpe,
                       const TensorView& tokens, const TensorView& out) const;

  // dwte (V,C) and dwpe (max_T,C) ACCUMULATED (rows >= T of dwpe untouched).
  absl::Status Backward(const ComputeContext& ctx, const TensorView& tokens, const TensorView& dout,
                        const TensorView& dwte, const TensorView& dwpe) const;

 private:
  absl::Status CheckTokens(const ComputeContext& ctx, const TensorView& tokens) const;

  int64_t v_;
  int64_t max_t_;
  int64_t c_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_NN_EMBEDDING_H_
