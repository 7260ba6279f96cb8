// The LM head tied to the token embedding: logits = x · wte^T.
// N rows, C channels, V vocab; wte (V,C) is "wte.weight", owned by the
// embedding unit. Everything in ctx.compute_dtype.
#ifndef ZEROSHARD_NN_TIED_LM_HEAD_H_
#define ZEROSHARD_NN_TIED_LM_HEAD_H_

#include <cstdint>

#include "absl/status/status.h"
#include "nn/unit.h"

namespace zeroshard {

class TiedLmHead {
 public:
  TiedLmHead(int64_t vocab_size, int64_t channels) : v_(vocab_size), c_(channels) {}

  // logits (N,V) WRITTEN.
  absl::Status Forward(const ComputeContext& ctx, const TensorView& wte, const TensorView& x,
                       const TensorView& logits) const;

  // dx (N,C) WRITTEN = dlogits · wte; dwte (V,C) ACCUMULATED += dlogits^T · x.
  // dx.data null skips dx (then wte is unread), dwte.data null skips dwte
  // (then x is unread); each part is the full call's GEMM, so bitwise equal.
  // kInvalidArgument when both are null.
  absl::Status Backward(const ComputeContext& ctx, const TensorView& wte, const TensorView& x,
                        const TensorView& dlogits, const TensorView& dx, const TensorView& dwte) const;

 private:
  int64_t v_;
  int64_t c_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_NN_TIED_LM_HEAD_H_
