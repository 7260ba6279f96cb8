// Element types and the f16/bf16 <-> f32 conversions everything else uses.
//
// Conversions from f32 round to nearest, ties to even; inf and NaN are kept
// (NaN stays a quiet NaN with its sign); f16 subnormals are produced and read
// exactly. The functions are host/device so CUDA kernels share them.
#ifndef ZEROSHARD_CORE_DTYPE_H_
#define ZEROSHARD_CORE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#if defined(__CUDACC__)
#define ZS_HOST_DEVICE __host__ __device__
#else
#define ZS_HOST_DEVICE
#endif

// An inline function the compiler must inline: per-element helpers, so that
// the CPU loops that call them are compiled whole at each vector ISA
// (kernels/cpu/vector_isa.h).
#if defined(__CUDACC__)
#define ZS_FORCE_INLINE __forceinline__
#else
#define ZS_FORCE_INLINE __attribute__((always_inline)) inline
#endif

namespace zeroshard {

// New types are appended: the numbering travels in pipeline transfer headers
// and collective fingerprints.
enum class DType : uint8_t { kF32, kF16, kBF16, kI32, kU16, kI8 };

// Bytes per element.
size_t DTypeSize(DType dtype);
// "f32", "f16", "bf16", "i32", "u16", "i8".
const char* DTypeName(DType dtype);
// Inverse of DTypeName; kInvalidArgument naming the text otherwise.
absl::StatusOr<DType> ParseDType(absl::string_view name);

ZS_HOST_DEVICE ZS_FORCE_INLINE uint32_t F32Bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}

ZS_HOST_DEVICE ZS_FORCE_INLINE float F32FromBits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

// bf16 is the top half of an f32.
ZS_HOST_DEVICE ZS_FORCE_INLINE float BF16ToF32(uint16_t h) { return F32FromBits(static_cast<uint32_t>(h) << 16); }

ZS_HOST_DEVICE ZS_FORCE_INLINE uint16_t F32ToBF16(float f) {
  uint32_t u = F32Bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep sign, force quiet.
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  }
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;  // Round to nearest even; overflow carries into inf.
  return static_cast<uint16_t>(u >> 16);
}

ZS_HOST_DEVICE ZS_FORCE_INLINE float F16ToF32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return F32FromBits(sign | 0x7f800000u | (mant << 13));  // inf/NaN
  if (exp == 0) {
    if (mant == 0) return F32FromBits(sign);
    // Subnormal: value = mant * 2^-24, exact in f32.
    float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return F32FromBits(sign | ((exp + 112u) << 23) | (mant << 13));
}

ZS_HOST_DEVICE ZS_FORCE_INLINE uint16_t F32ToF16(float f) {
  uint32_t u = F32Bits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((abs >> 13) & 0x3ffu);  // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf.
  if (abs < 0x38800000u) {
    // Result is subnormal or zero: value / 2^-24, rounded to nearest even.
    // Shifting the full 24-bit significand right keeps exact sticky bits.
    if (abs < 0x33000000u) return sign;  // < 2^-25: rounds to zero (tie at 2^-25 -> 0 even).
    uint32_t exp = abs >> 23;
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exp;  // value * 2^24 = mant * 2^(exp - 126)
    uint32_t result = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (result & 1u))) ++result;
    return sign | static_cast<uint16_t>(result);
  }
  // Normal: rebias exponent and round the 13 dropped mantissa bits.
  uint32_t lsb = (abs >> 13) & 1u;
  abs += 0xfffu + lsb;
  return sign | static_cast<uint16_t>((abs - 0x38000000u) >> 13);
}

// Converts n elements between f32 and a 16-bit float type (kF16 or kBF16).
void ConvertF32ToHalf(const float* in, uint16_t* out, size_t n, DType dtype);
void ConvertHalfToF32(const uint16_t* in, float* out, size_t n, DType dtype);

}  // namespace zeroshard

#endif  // ZEROSHARD_CORE_DTYPE_H_
