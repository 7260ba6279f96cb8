// Global gradient-norm clipping math (PyTorch's clip_grad_norm_).
//
// The engine computes each rank's sum of squares over the gradient elements
// it owns (its shard; padding is zero), all-reduces the sums once, and takes
// the square root; every rank then scales its shard by ClipCoefficient.
#ifndef ZEROSHARD_SHARDING_GRAD_CLIP_H_
#define ZEROSHARD_SHARDING_GRAD_CLIP_H_

#include <cstdint>

namespace zeroshard {

// Sum of squares of x[0, n), accumulated in double in index order so the
// result depends only on the values (bitwise repeatable).
double SumOfSquares(const float* x, int64_t n);

// min(1, max_norm / (total_norm + 1e-6)); 1 when max_norm <= 0 (clipping off).
// Non-finite total_norm gives a non-finite coefficient: the caller skips the
// step.
float ClipCoefficient(float total_norm, float max_norm);

}  // namespace zeroshard

#endif  // ZEROSHARD_SHARDING_GRAD_CLIP_H_
