// Fused softmax + cross-entropy over the vocabulary.
//
// N rows (B*T), V vocab. logits/dlogits in dtype; targets int32 in [0, V), or
// negative for an ignored row (PyTorch's ignore_index, any negative value);
// losses, lse and the loss sums are f32. Thread-count independent on CPU.
#ifndef ZEROSHARD_KERNELS_CROSS_ENTROPY_H_
#define ZEROSHARD_KERNELS_CROSS_ENTROPY_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/context.h"

namespace zeroshard::kernels {

// losses (N) = lse - logits[target], 0 for an ignored row; lse (N) =
// log(sum_v exp(logits)) saved for backward. loss_sums (2 floats on ctx's
// device, may be null): [0] = sum of the losses of the rows with a target
// (summed in f64 in row order on CPU, then rounded to f32), [1] = the number
// of those rows (exact up to 2^24). On CPU a target >= V is kInvalidArgument
// naming it and its row; CUDA does not check.
absl::Status CrossEntropyForward(const KernelContext& ctx, float* losses, float* lse, float* loss_sums,
                                 const void* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                                 DType dtype);

// dlogits (N,V) = (softmax(logits) - onehot(target)) * dloss, WRITTEN; rows
// with an ignored target get exactly 0. dloss is the gradient of the
// objective w.r.t. each valid row's loss (the loss scale when the objective
// is the sum of losses). dlogits may alias logits.
absl::Status CrossEntropyBackward(const KernelContext& ctx, void* dlogits, const void* logits, const float* lse,
                                  const int32_t* targets, float dloss, int64_t rows, int64_t vocab, DType dtype);

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_CROSS_ENTROPY_H_
