// Softmax cross-entropy over the vocabulary, mean over rows.
// N rows (B*T), V vocab; logits (N,V) in ctx.compute_dtype; targets (N) i32;
// per-row losses, lse and the mean are f32.
#ifndef ZEROSHARD_NN_CROSS_ENTROPY_H_
#define ZEROSHARD_NN_CROSS_ENTROPY_H_

#include <cstdint>

#include "absl/status/status.h"
#include "nn/unit.h"

namespace zeroshard {

class CrossEntropy {
 public:
  explicit CrossEntropy(int64_t vocab_size) : v_(vocab_size) {}

  // losses (N), lse (N) and mean_loss (1) WRITTEN. kInvalidArgument (on CPU)
  // naming the row for a target outside [0, V).
  absl::Status Forward(const ComputeContext& ctx, const TensorView& logits, const TensorView& targets,
                       const TensorView& losses, const TensorView& lse, const TensorView& mean_loss) const;

  // dlogits (N,V) WRITTEN = d(objective)/d(logits) where
  // d(objective)/d(mean loss) = dmean_loss.
  absl::Status Backward(const ComputeContext& ctx, const TensorView& logits, const TensorView& lse,
                        const TensorView& targets, float dmean_loss, const TensorView& dlogits) const;

 private:
  int64_t v_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_NN_CROSS_ENTROPY_H_
