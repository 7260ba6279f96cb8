// Optimizer update kernels on f32 parameter, gradient and state arrays
// (master weights and optimizer state are always f32). Element-wise, so
// thread-count independent on CPU; CPU and CUDA call the same per-element
// code (pointwise_math.h) and agree up to the compiler's FMA contraction.
#ifndef ZEROSHARD_KERNELS_OPTIMIZER_H_
#define ZEROSHARD_KERNELS_OPTIMIZER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/context.h"

namespace zeroshard::kernels {

// PyTorch torch.optim.AdamW: p *= 1 - lr*wd; m = lerp(m, g, 1-beta1);
// v = beta2*v + (1-beta2)*g^2; p -= lr/(1-beta1^step) * m / (sqrt(v)/sqrt(1-beta2^step) + eps).
struct AdamWHyper {
  float lr, beta1, beta2, eps, weight_decay;
  int64_t step;  // 1-based: the first update has step == 1.
};

// The per-call constants (1 - beta, lr / bias correction, ...) are derived in
// double from each f32 hyperparameter's shortest decimal form (0.999f is
// taken as 0.999), as PyTorch derives them from Python floats.
//
// Updates n elements of param, exp_avg (m) and exp_avg_sq (v) in place from
// grad. kInvalidArgument when step < 1, n < 0, or a pointer is null (n > 0).
absl::Status AdamWUpdate(const KernelContext& ctx, float* param, const float* grad, float* exp_avg,
                         float* exp_avg_sq, int64_t n, const AdamWHyper& h);

// PyTorch torch.optim.SGD: g += wd*p; with momentum, buf = g on the first
// step else momentum*buf + (1-dampening)*g, and g = nesterov ? g + momentum*buf : buf;
// p -= lr*g. momentum_buf may be null when momentum == 0. nesterov needs
// momentum > 0 and dampening == 0 (kInvalidArgument otherwise, as PyTorch).
struct SgdHyper {
  float lr, momentum, dampening, weight_decay;
  bool nesterov;
  bool first_step;  // true on the first update: momentum_buf is initialised to g.
};

absl::Status SgdUpdate(const KernelContext& ctx, float* param, const float* grad, float* momentum_buf, int64_t n,
                       const SgdHyper& h);

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_OPTIMIZER_H_
