// Per-element math of the int8 block quantization (kernels/quantize.h),
// host/device so the CPU loops and the CUDA kernels share it and agree
// bitwise: every operation is one IEEE-rounded f32/f64 operation (on CUDA the
// _rn intrinsics keep nvcc from contracting a multiply and an add into an
// FMA; the CPU library is built with -ffp-contract=off for the same reason).
#ifndef ZEROSHARD_KERNELS_QUANTIZE_MATH_H_
#define ZEROSHARD_KERNELS_QUANTIZE_MATH_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/dtype.h"

namespace zeroshard::kernels {

// Offset of the scales in the packed form: n rounded up to a multiple of 4.
ZS_HOST_DEVICE inline int64_t Int8ScalesOffset(int64_t n) { return (n + 3) / 4 * 4; }

// The scale of a block holding an inf or NaN under kPropagate (a quiet NaN,
// the same bits on every device).
ZS_HOST_DEVICE inline float QuantNonFiniteScale() { return F32FromBits(0x7fc00000u); }

ZS_HOST_DEVICE inline float QuantAdd(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

ZS_HOST_DEVICE inline float QuantSub(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

ZS_HOST_DEVICE inline float QuantMul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// |c| <= FLT_MAX: false for inf and NaN.
ZS_HOST_DEVICE inline bool QuantFinite(float c) { return (F32Bits(c) & 0x7fffffffu) < 0x7f800000u; }

// scale = amax / 127, one f32 division.
ZS_HOST_DEVICE inline float QuantScale(float amax) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(amax, 127.0f);
#else
  return amax / 127.0f;
#endif
}

// q = c / scale rounded to the nearest integer (ties to even), clamped to
// [-127, 127]; 0 when scale is 0. The quotient is taken in f64: for f32 c
// and scale it is then never rounded onto or across a half-integer (the exact
// quotient is at least 2^-27 from any half-integer it is not equal to, far
// more than the f64 error), so q is the exact quotient's nearest integer and
// |c - q * scale| <= scale / 2 exactly when no clamping happens (scale normal).
ZS_HOST_DEVICE inline int8_t QuantValue(float c, float scale) {
  if (scale == 0.0f) return 0;
#ifdef __CUDA_ARCH__
  double v = __ddiv_rn(static_cast<double>(c), static_cast<double>(scale));
#else
  double v = static_cast<double>(c) / static_cast<double>(scale);
#endif
  v = v < -127.0 ? -127.0 : (v > 127.0 ? 127.0 : v);
  // Adding and subtracting 1.5 * 2^52 rounds |v| < 2^51 to an integer, ties
  // to even (the default rounding mode), without a libm call, so it vectorizes.
  constexpr double kRound = 6755399441055744.0;
#ifdef __CUDA_ARCH__
  v = __dsub_rn(__dadd_rn(v, kRound), kRound);
#else
  v = (v + kRound) - kRound;
#endif
  return static_cast<int8_t>(static_cast<int>(v));
}

// The dequantized value q * scale (f32).
ZS_HOST_DEVICE inline float QuantDequant(int8_t q, float scale) { return QuantMul(static_cast<float>(q), scale); }

// kReject's error for element i (of n, in block b) whose value c (x, or
// x + residual) is inf or NaN. Host only; the same text from every device.
inline absl::Status QuantNonFiniteError(int64_t i, int64_t n, float c, int64_t b) {
  const char* what = c != c ? "nan" : (c < 0.0f ? "-inf" : "inf");
  return absl::InvalidArgumentError(absl::StrCat("quantize: element ", i, " of ", n, " is ", what, " (block ", b,
                                                 "); int8 quantization needs finite values"));
}

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_QUANTIZE_MATH_H_
