// Argument checks shared by the kernel entry points (private to kernels/).
// Every error names the kernel, the offending argument, its value and what
// was expected.
#ifndef ZEROSHARD_KERNELS_CHECKS_H_
#define ZEROSHARD_KERNELS_CHECKS_H_

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/step_profile.h"
#include "kernels/context.h"

namespace zeroshard::kernels {

using NamedDim = std::pair<const char*, int64_t>;
using NamedPtr = std::pair<const char*, const void*>;

// Each dimension must be >= 1 (sizes of zero are rejected: no kernel has a
// meaningful empty case that callers rely on).
inline absl::Status CheckDims(const char* kernel, std::initializer_list<NamedDim> dims) {
  for (const auto& [name, value] : dims) {
    if (value < 1) {
      return absl::InvalidArgumentError(absl::StrCat(kernel, ": ", name, " = ", value, ", expected >= 1"));
    }
  }
  return absl::OkStatus();
}

// Element counts may be zero (then nothing happens) but not negative.
inline absl::Status CheckCount(const char* kernel, const char* name, int64_t n) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat(kernel, ": ", name, " = ", n, ", expected >= 0"));
  return absl::OkStatus();
}

inline absl::Status CheckNotNull(const char* kernel, std::initializer_list<NamedPtr> ptrs) {
  for (const auto& [name, ptr] : ptrs) {
    if (ptr == nullptr) return absl::InvalidArgumentError(absl::StrCat(kernel, ": ", name, " is null"));
  }
  return absl::OkStatus();
}

inline absl::Status CheckComputeDType(const char* kernel, DType dtype) {
  if (dtype != DType::kF32 && dtype != DType::kBF16 && dtype != DType::kF16) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel, ": dtype ", DTypeName(dtype), ", expected f32, bf16 or f16"));
  }
  return absl::OkStatus();
}

// For kernels that hand dimensions to BLAS (32-bit ints).
inline absl::Status CheckFitsInt32(const char* kernel, std::initializer_list<NamedDim> dims) {
  for (const auto& [name, value] : dims) {
    if (value > INT32_MAX) {
      return absl::InvalidArgumentError(
          absl::StrCat(kernel, ": ", name, " = ", value, ", expected <= ", INT32_MAX, " (BLAS uses 32-bit sizes)"));
    }
  }
  return absl::OkStatus();
}

inline absl::Status NoCudaError(const char* kernel) {
  return absl::UnavailableError(absl::StrCat(kernel, ": ctx.device is cuda but zeroshard was built without CUDA"));
}

inline absl::Status UnknownDeviceError(const char* kernel, Device device) {
  return absl::InvalidArgumentError(
      absl::StrCat(kernel, ": ctx.device = ", static_cast<int>(device), ", expected cpu or cuda"));
}

}  // namespace zeroshard::kernels

// Ends a kernel entry point: runs `cpu_call` on kCpu (inside a step-profile
// scope named by `kernel`, core/step_profile.h), `cuda_call` on kCuda (an
// error when built without CUDA). Expanded in the entry point's .cc, where
// ZEROSHARD_HAS_CUDA comes from the kernels/cuda dependency.
#ifdef ZEROSHARD_HAS_CUDA
#define ZS_KERNEL_DISPATCH(kernel, ctx, cpu_call, cuda_call)                                   \
  switch ((ctx).device) {                                                                      \
    case ::zeroshard::Device::kCpu: {                                                          \
      const ::zeroshard::step_profile::Scope zs_profile_scope(kernel);                         \
      return cpu_call;                                                                         \
    }                                                                                          \
    case ::zeroshard::Device::kCuda:                                                           \
      return cuda_call;                                                                        \
  }                                                                                            \
  return ::zeroshard::kernels::UnknownDeviceError(kernel, (ctx).device)
#else
#define ZS_KERNEL_DISPATCH(kernel, ctx, cpu_call, cuda_call)                                   \
  switch ((ctx).device) {                                                                      \
    case ::zeroshard::Device::kCpu: {                                                          \
      const ::zeroshard::step_profile::Scope zs_profile_scope(kernel);                         \
      return cpu_call;                                                                         \
    }                                                                                          \
    case ::zeroshard::Device::kCuda:                                                           \
      return ::zeroshard::kernels::NoCudaError(kernel);                                        \
  }                                                                                            \
  return ::zeroshard::kernels::UnknownDeviceError(kernel, (ctx).device)
#endif

#endif  // ZEROSHARD_KERNELS_CHECKS_H_
