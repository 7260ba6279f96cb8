// Element-wise math written once for the CPU loops and the CUDA kernels.
// Everything is f32 in, f32 out; callers widen/round with float_types.h.
#ifndef ZEROSHARD_KERNELS_POINTWISE_MATH_H_
#define ZEROSHARD_KERNELS_POINTWISE_MATH_H_

#include <cmath>

#include "core/dtype.h"  // ZS_HOST_DEVICE

namespace zeroshard::kernels {

// sqrt(2/pi), as in GPT-2's gelu: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline constexpr float kGeluScale = 0.7978845608028654f;
inline constexpr float kGeluCube = 0.044715f;

// 0.5 x (1 + tanh(u)) == x * sigmoid(2u): one expf instead of tanhf, and no
// cancellation near u = 0. exp overflow for very negative u gives -0.
ZS_HOST_DEVICE inline float GeluTanh(float x) {
  float u = kGeluScale * (x + kGeluCube * x * x * x);
  return x / (1.0f + expf(-2.0f * u));
}

// d/dx GeluTanh(x) = s + x * s * (1 - s) * 2 du/dx with s = sigmoid(2u).
ZS_HOST_DEVICE inline float GeluTanhGrad(float x) {
  float u = kGeluScale * (x + kGeluCube * x * x * x);
  float s = 1.0f / (1.0f + expf(-2.0f * u));
  float du = kGeluScale * (1.0f + 3.0f * kGeluCube * x * x);
  return s + x * s * (1.0f - s) * 2.0f * du;
}

// LayerNorm backward for one element, given the row's
//   dnorm_mean = mean_c(dout*w), dnorm_norm_mean = mean_c(dout*w*norm):
// dinp = rstd * (dout*w - dnorm_mean - norm * dnorm_norm_mean).
ZS_HOST_DEVICE inline float LayerNormInputGrad(float dout_times_weight, float norm, float rstd, float dnorm_mean,
                                               float dnorm_norm_mean) {
  return rstd * (dout_times_weight - dnorm_mean - norm * dnorm_norm_mean);
}

// Softmax backward for one element of a row: p * (dp - sum_k p_k dp_k).
ZS_HOST_DEVICE inline float SoftmaxInputGrad(float p, float dp, float sum_p_dp) { return p * (dp - sum_p_dp); }

// Cross-entropy gradient for one logit: (softmax - onehot) * dloss, with the
// softmax computed from the row's log-sum-exp.
ZS_HOST_DEVICE inline float CrossEntropyLogitGrad(float logit, float lse, bool is_target, float dloss) {
  float p = expf(logit - lse);
  return (p - (is_target ? 1.0f : 0.0f)) * dloss;
}

// Per-call AdamW constants, computed on the host in double as PyTorch does
// with Python floats, then rounded to f32.
struct AdamWScalars {
  float decay_factor;           // 1 - lr * weight_decay
  float one_minus_beta1;        // lerp weight for exp_avg
  float beta2;
  float one_minus_beta2;
  float step_size;              // lr / (1 - beta1^step)
  float bias_correction2_sqrt;  // sqrt(1 - beta2^step)
  float eps;
};

// One AdamW element, PyTorch's single-tensor order of operations:
//   p *= 1 - lr*wd; m.lerp_(g, 1-b1); v = v*b2 + (1-b2)*g*g;
//   p -= step_size * m / (sqrt(v)/sqrt(bc2) + eps).
// kSmallWeight selects torch.lerp's form for weight 1-b1 < 0.5 (branch-free
// loops call this directly; AdamWElement picks it per call).
template <bool kSmallWeight>
ZS_HOST_DEVICE inline void AdamWElementT(float& p, float g, float& m, float& v, const AdamWScalars& s) {
  p *= s.decay_factor;
  m = kSmallWeight ? m + s.one_minus_beta1 * (g - m) : g - (g - m) * (1.0f - s.one_minus_beta1);
  v = v * s.beta2 + s.one_minus_beta2 * g * g;
  float denom = sqrtf(v) / s.bias_correction2_sqrt + s.eps;
  p = p - (s.step_size * m) / denom;  // addcdiv_(m, denom, -step_size)
}

ZS_HOST_DEVICE inline void AdamWElement(float& p, float g, float& m, float& v, const AdamWScalars& s) {
  if (s.one_minus_beta1 < 0.5f) {
    AdamWElementT<true>(p, g, m, v, s);
  } else {
    AdamWElementT<false>(p, g, m, v, s);
  }
}

// One SGD element with PyTorch's semantics (torch.optim.SGD):
//   g += wd*p; if momentum: buf = first ? g : momentum*buf + (1-dampening)*g;
//   g = nesterov ? g + momentum*buf : buf; p -= lr*g.
ZS_HOST_DEVICE inline void SgdElement(float& p, float g, float* buf, float lr, float momentum, float dampening,
                                      float weight_decay, bool nesterov, bool first_step) {
  if (weight_decay != 0.0f) g = g + weight_decay * p;
  if (momentum != 0.0f) {
    float b = first_step ? g : *buf * momentum + (1.0f - dampening) * g;
    *buf = b;
    g = nesterov ? g + momentum * b : b;
  }
  p = p - lr * g;
}

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_POINTWISE_MATH_H_
