// Storage types for the compute dtypes, so kernels are templates on the
// element type and convert to f32 for arithmetic: Load() widens to f32,
// Store() rounds an f32 to the storage type (nearest even, core/dtype.h).
// Host/device: the CPU loops and the CUDA kernels share them.
#ifndef ZEROSHARD_KERNELS_FLOAT_TYPES_H_
#define ZEROSHARD_KERNELS_FLOAT_TYPES_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/dtype.h"

namespace zeroshard::kernels {

struct Bf16 {
  uint16_t bits;
};
struct F16 {
  uint16_t bits;
};

ZS_HOST_DEVICE ZS_FORCE_INLINE float Load(float v) { return v; }
ZS_HOST_DEVICE ZS_FORCE_INLINE float Load(Bf16 v) { return BF16ToF32(v.bits); }
ZS_HOST_DEVICE ZS_FORCE_INLINE float Load(F16 v) { return F16ToF32(v.bits); }

template <typename T>
ZS_HOST_DEVICE ZS_FORCE_INLINE T Store(float v);
template <>
ZS_HOST_DEVICE ZS_FORCE_INLINE float Store<float>(float v) {
  return v;
}
template <>
ZS_HOST_DEVICE ZS_FORCE_INLINE Bf16 Store<Bf16>(float v) {
  return Bf16{F32ToBF16(v)};
}
template <>
ZS_HOST_DEVICE ZS_FORCE_INLINE F16 Store<F16>(float v) {
  return F16{F32ToF16(v)};
}

// Calls fn(T{}) with T the storage type of `dtype` (f32, bf16 or f16) and
// returns its status; kInvalidArgument naming `what` for any other dtype.
template <typename Fn>
absl::Status DispatchFloatDType(DType dtype, const char* what, Fn&& fn) {
  switch (dtype) {
    case DType::kF32:
      return fn(float{});
    case DType::kBF16:
      return fn(Bf16{});
    case DType::kF16:
      return fn(F16{});
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": dtype ", DTypeName(dtype), " is not a compute dtype (expected f32, bf16 or f16)"));
  }
}

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_FLOAT_TYPES_H_
