// Lion ("Symbolic Discovery of Optimization Algorithms", Chen et al. 2023)
// on f32 parameter, gradient and momentum arrays, in the paper's order:
//   c = beta1*m + (1-beta1)*g
//   p = p - lr*(sign(c) + wd*p)      (decoupled weight decay, on the old p)
//   m = beta2*m + (1-beta2)*g
// sign(0) = 0 (a zero interpolation leaves p to the decay alone) and NaN
// stays NaN. Element-wise (thread-count independent); the CPU and CUDA
// kernels run the same f32 operations with no FMA contraction
// (kernels/lion_math.h), so they agree bitwise. 1-beta is formed in f32
// (exact for beta in [0.5, 1]).
#ifndef ZEROSHARD_KERNELS_LION_H_
#define ZEROSHARD_KERNELS_LION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/context.h"

namespace zeroshard::kernels {

struct LionHyper {
  float lr, beta1, beta2, weight_decay;
};

// Updates n elements of param and exp_avg (m) in place from grad.
// kInvalidArgument when n < 0 or a pointer is null (n > 0).
absl::Status LionUpdate(const KernelContext& ctx, float* param, const float* grad, float* exp_avg, int64_t n,
                        const LionHyper& h);

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_LION_H_
