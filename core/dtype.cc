#include "core/dtype.h"

#include "absl/strings/str_cat.h"

namespace zeroshard {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
    case DType::kU16:
      return 2;
    case DType::kI8:
      return 1;
  }
  return 0;
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kI32:
      return "i32";
    case DType::kU16:
      return "u16";
    case DType::kI8:
      return "i8";
  }
  return "?";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kU16, DType::kI8}) {
    if (name == DTypeName(d)) return d;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", name, "'; expected one of f32, f16, bf16, i32, u16, i8"));
}

void ConvertF32ToHalf(const float* in, uint16_t* out, size_t n, DType dtype) {
  if (dtype == DType::kBF16) {
    for (size_t i = 0; i < n; ++i) out[i] = F32ToBF16(in[i]);
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = F32ToF16(in[i]);
  }
}

void ConvertHalfToF32(const uint16_t* in, float* out, size_t n, DType dtype) {
  if (dtype == DType::kBF16) {
    for (size_t i = 0; i < n; ++i) out[i] = BF16ToF32(in[i]);
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = F16ToF32(in[i]);
  }
}

}  // namespace zeroshard
