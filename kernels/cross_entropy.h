// Fused softmax + cross-entropy over the vocabulary.
//
// N rows (B*T), V vocab. logits/dlogits in dtype; targets int32 in [0, V);
// losses, lse and the mean are f32. Thread-count independent on CPU.
#ifndef ZEROSHARD_KERNELS_CROSS_ENTROPY_H_
#define ZEROSHARD_KERNELS_CROSS_ENTROPY_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/context.h"

namespace zeroshard::kernels {

// losses (N) = lse - logits[target]; lse (N) = log(sum_v exp(logits)) saved
// for backward; mean_loss (one float on ctx's device, may be null) = mean of
// losses, summed in f64 in row order on CPU. On CPU a target outside [0, V) is
// kInvalidArgument naming it and its row; CUDA does not check.
absl::Status CrossEntropyForward(const KernelContext& ctx, float* losses, float* lse, float* mean_loss,
                                 const void* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                                 DType dtype);

// dlogits (N,V) = (softmax(logits) - onehot(target)) * dloss, WRITTEN.
// dloss is the gradient of the objective w.r.t. each row's loss, e.g.
// 1/(N * micro-batches) * loss_scale for a mean. dlogits may alias logits.
absl::Status CrossEntropyBackward(const KernelContext& ctx, void* dlogits, const void* logits, const float* lse,
                                  const int32_t* targets, float dloss, int64_t rows, int64_t vocab, DType dtype);

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_CROSS_ENTROPY_H_
