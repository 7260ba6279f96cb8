// Softmax cross-entropy over the vocabulary: the sum over the rows with a
// target and their count. N rows (B*T), V vocab; logits (N,V) in
// ctx.compute_dtype; targets (N) i32 in [0, V), or negative for a row that is
// ignored (loss 0, not counted, zero gradient); per-row losses, lse and the
// loss sums are f32.
#ifndef ZEROSHARD_NN_CROSS_ENTROPY_H_
#define ZEROSHARD_NN_CROSS_ENTROPY_H_

#include <cstdint>

#include "absl/status/status.h"
#include "nn/unit.h"

namespace zeroshard {

class CrossEntropy {
 public:
  explicit CrossEntropy(int64_t vocab_size) : v_(vocab_size) {}

  // losses (N), lse (N) and loss_sums (2) WRITTEN: loss_sums[0] = sum of the
  // valid rows' losses, loss_sums[1] = number of valid rows. kInvalidArgument
  // (on CPU) naming the row for a target >= V.
  absl::Status Forward(const ComputeContext& ctx, const TensorView& logits, const TensorView& targets,
                       const TensorView& losses, const TensorView& lse, const TensorView& loss_sums) const;

  // dlogits (N,V) WRITTEN = d(objective)/d(logits) where dloss =
  // d(objective)/d(each valid row's loss), e.g. the loss scale for a sum or
  // 1/count for a mean; ignored rows get 0.
  absl::Status Backward(const ComputeContext& ctx, const TensorView& logits, const TensorView& lse,
                        const TensorView& targets, float dloss, const TensorView& dlogits) const;

 private:
  int64_t v_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_NN_CROSS_ENTROPY_H_
