// Element-wise math written once for the CPU loops and the CUDA kernels.
// Everything is f32 in, f32 out; callers widen/round with float_types.h.
#ifndef ZEROSHARD_KERNELS_POINTWISE_MATH_H_
#define ZEROSHARD_KERNELS_POINTWISE_MATH_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"  // ZS_HOST_DEVICE

namespace zeroshard::kernels {

// exp(x) in f32. On the host it is built from float operations only, so the
// CPU loops that call it vectorise (glibc's expf is an opaque scalar call):
// x = n ln2 + r with |r| <= ln2/2 (two-part ln2, exact in the first part),
// a degree-7 polynomial for exp(r), then 2^n applied as two exact power-of-two
// scalings. Within 1 ulp of exp for x in [ln(FLT_MIN), ln(FLT_MAX)]; 0 below
// (where exp is subnormal), +inf above, NaN for NaN. The same on every x86-64
// CPU at the default (baseline) ISA, where no multiply-add can be fused.
// Device code keeps CUDA's expf.
ZS_HOST_DEVICE ZS_FORCE_INLINE float ExpF32(float x) {
#ifdef __CUDA_ARCH__
  return expf(x);
#else
  constexpr float kLo = -87.336544f;  // ln(FLT_MIN)
  constexpr float kHi = 88.722839f;   // ln(FLT_MAX)
  // Unnested selects, every comparison unconditional: with
  // -fno-trapping-math (kernels/cpu/BUILD) the loops if-convert and vectorise.
  const bool below = x < kLo, above = x > kHi;
  float xc = above ? kHi : x;
  xc = below ? kLo : xc;  // NaN stays NaN
  // Round x/ln2 to the nearest integer: adding 1.5 * 2^23 leaves no fraction bits.
  constexpr float kRound = 12582912.0f;
  float n = (xc * 1.44269504088896341f + kRound) - kRound;
  n = n == n ? n : 0.0f;  // keep the integer path defined for NaN (y is NaN anyway)
  float r = xc - n * 0.693359375f;  // 9-bit ln2: the product is exact
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  // 2^n for n in [-126, 128] as 2^n1 * 2^n2, each a normal float.
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t n1 = ni / 2, n2 = ni - n1;
  const uint32_t b1 = static_cast<uint32_t>(n1 + 127) << 23, b2 = static_cast<uint32_t>(n2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, sizeof s1);
  std::memcpy(&s2, &b2, sizeof s2);
  const float e = y * s1 * s2;
  const float big = above ? INFINITY : e;
  return below ? 0.0f : big;
#endif
}

// sqrt(2/pi), as in GPT-2's gelu: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline constexpr float kGeluScale = 0.7978845608028654f;
inline constexpr float kGeluCube = 0.044715f;

// 0.5 x (1 + tanh(u)) == x * sigmoid(2u): one exp instead of tanhf, and no
// cancellation near u = 0. exp overflow for very negative u gives -0.
ZS_HOST_DEVICE ZS_FORCE_INLINE float GeluTanh(float x) {
  float u = kGeluScale * (x + kGeluCube * x * x * x);
  return x / (1.0f + ExpF32(-2.0f * u));
}

// d/dx GeluTanh(x) = s + x * s * (1 - s) * 2 du/dx with s = sigmoid(2u).
ZS_HOST_DEVICE ZS_FORCE_INLINE float GeluTanhGrad(float x) {
  float u = kGeluScale * (x + kGeluCube * x * x * x);
  float s = 1.0f / (1.0f + ExpF32(-2.0f * u));
  float du = kGeluScale * (1.0f + 3.0f * kGeluCube * x * x);
  return s + x * s * (1.0f - s) * 2.0f * du;
}

// LayerNorm backward for one element, given the row's
//   dnorm_mean = mean_c(dout*w), dnorm_norm_mean = mean_c(dout*w*norm):
// dinp = rstd * (dout*w - dnorm_mean - norm * dnorm_norm_mean).
ZS_HOST_DEVICE ZS_FORCE_INLINE float LayerNormInputGrad(float dout_times_weight, float norm, float rstd, float dnorm_mean,
                                               float dnorm_norm_mean) {
  return rstd * (dout_times_weight - dnorm_mean - norm * dnorm_norm_mean);
}

// Softmax backward for one element of a row: p * (dp - sum_k p_k dp_k).
ZS_HOST_DEVICE ZS_FORCE_INLINE float SoftmaxInputGrad(float p, float dp, float sum_p_dp) { return p * (dp - sum_p_dp); }

// Cross-entropy gradient for one logit: (softmax - onehot) * dloss, with the
// softmax computed from the row's log-sum-exp.
ZS_HOST_DEVICE ZS_FORCE_INLINE float CrossEntropyLogitGrad(float logit, float lse, bool is_target, float dloss) {
  float p = ExpF32(logit - lse);
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
ZS_HOST_DEVICE ZS_FORCE_INLINE void AdamWElementT(float& p, float g, float& m, float& v, const AdamWScalars& s) {
  p *= s.decay_factor;
  m = kSmallWeight ? m + s.one_minus_beta1 * (g - m) : g - (g - m) * (1.0f - s.one_minus_beta1);
  v = v * s.beta2 + s.one_minus_beta2 * g * g;
  float denom = sqrtf(v) / s.bias_correction2_sqrt + s.eps;
  p = p - (s.step_size * m) / denom;  // addcdiv_(m, denom, -step_size)
}

ZS_HOST_DEVICE ZS_FORCE_INLINE void AdamWElement(float& p, float g, float& m, float& v, const AdamWScalars& s) {
  if (s.one_minus_beta1 < 0.5f) {
    AdamWElementT<true>(p, g, m, v, s);
  } else {
    AdamWElementT<false>(p, g, m, v, s);
  }
}

// One SGD element with PyTorch's semantics (torch.optim.SGD):
//   g += wd*p; if momentum: buf = first ? g : momentum*buf + (1-dampening)*g;
//   g = nesterov ? g + momentum*buf : buf; p -= lr*g.
ZS_HOST_DEVICE ZS_FORCE_INLINE void SgdElement(float& p, float g, float* buf, float lr, float momentum, float dampening,
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
