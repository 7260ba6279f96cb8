// One Lion element (kernels/lion.h), host/device so the CPU loop and the
// CUDA kernel share it and agree bitwise: each operation is one IEEE-rounded
// f32 operation (on CUDA the _rn intrinsics keep nvcc from contracting a
// multiply and an add into an FMA; the CPU library is built with
// -ffp-contract=off for the same reason).
#ifndef ZEROSHARD_KERNELS_LION_MATH_H_
#define ZEROSHARD_KERNELS_LION_MATH_H_

#include "core/dtype.h"  // ZS_HOST_DEVICE

namespace zeroshard::kernels {

// Per-call constants.
struct LionScalars {
  float lr;
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float weight_decay;
};

ZS_HOST_DEVICE ZS_FORCE_INLINE float LionAdd(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

ZS_HOST_DEVICE ZS_FORCE_INLINE float LionMul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// sign(c): 1 or -1, and c itself for +-0 and NaN (as torch.sign).
ZS_HOST_DEVICE ZS_FORCE_INLINE float LionSign(float c) { return c > 0.0f ? 1.0f : (c < 0.0f ? -1.0f : c); }

// The paper's order (Chen et al. 2023, Program 1):
//   c = beta1*m + (1-beta1)*g;  p = p - lr*(sign(c) + wd*p);
//   m = beta2*m + (1-beta2)*g.
ZS_HOST_DEVICE ZS_FORCE_INLINE void LionElement(float& p, float g, float& m, const LionScalars& s) {
  const float c = LionAdd(LionMul(s.beta1, m), LionMul(s.one_minus_beta1, g));
  p = LionAdd(p, -LionMul(s.lr, LionAdd(LionSign(c), LionMul(s.weight_decay, p))));
  m = LionAdd(LionMul(s.beta2, m), LionMul(s.one_minus_beta2, g));
}

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_LION_MATH_H_
