#include "kernels/quantize.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/checks.h"
#include "kernels/cpu/quantize_cpu.h"
#include "kernels/cuda/quantize_launchers.h"
#include "kernels/quantize_math.h"

namespace zeroshard::kernels {
namespace {

absl::Status CheckSizes(const char* kernel, int64_t n, int64_t block) {
  RETURN_IF_ERROR(CheckCount(kernel, "n", n));
  return CheckDims(kernel, {{"block", block}});
}

// The scales are read and written as f32 in place.
absl::Status CheckPacked(const char* kernel, const void* packed) {
  RETURN_IF_ERROR(CheckNotNull(kernel, {{"packed", packed}}));
  const uintptr_t address = reinterpret_cast<uintptr_t>(packed);
  if (address % 4 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": packed address ", address,
                                                   " is not a multiple of 4 (expected 4-byte aligned f32 scales)"));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t Int8PackedBytes(int64_t n, int64_t block) {
  if (n < 0 || block < 1) return -1;
  return Int8ScalesOffset(n) + 4 * ((n + block - 1) / block);
}

absl::Status QuantizeInt8Blocks(const KernelContext& ctx, void* packed, const void* in, DType in_dtype, int64_t n,
                                int64_t block, NonFiniteInput non_finite, float* residual) {
  constexpr const char* kKernel = "QuantizeInt8Blocks";
  RETURN_IF_ERROR(CheckSizes(kKernel, n, block));
  RETURN_IF_ERROR(CheckComputeDType(kKernel, in_dtype));
  if (non_finite != NonFiniteInput::kReject && non_finite != NonFiniteInput::kPropagate) {
    return absl::InvalidArgumentError(
        absl::StrCat(kKernel, ": non_finite = ", static_cast<int>(non_finite), ", expected kReject or kPropagate"));
  }
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckNotNull(kKernel, {{"in", in}}));
  RETURN_IF_ERROR(CheckPacked(kKernel, packed));
  const bool reject = non_finite == NonFiniteInput::kReject;
  ZS_KERNEL_DISPATCH(kKernel, ctx,
                     cpu::QuantizeInt8Blocks(LoopThreads(ctx), packed, in, in_dtype, n, block, reject, residual),
                     cuda::QuantizeInt8Blocks(ctx, packed, in, in_dtype, n, block, reject, residual));
}

absl::Status DequantizeInt8Blocks(const KernelContext& ctx, void* out, DType out_dtype, const void* packed, int64_t n,
                                  int64_t block) {
  constexpr const char* kKernel = "DequantizeInt8Blocks";
  RETURN_IF_ERROR(CheckSizes(kKernel, n, block));
  RETURN_IF_ERROR(CheckComputeDType(kKernel, out_dtype));
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckNotNull(kKernel, {{"out", out}}));
  RETURN_IF_ERROR(CheckPacked(kKernel, packed));
  ZS_KERNEL_DISPATCH(kKernel, ctx, cpu::DequantizeInt8Blocks(LoopThreads(ctx), out, out_dtype, packed, n, block),
                     cuda::DequantizeInt8Blocks(ctx, out, out_dtype, packed, n, block));
}

absl::Status DequantizeInt8BlocksAccumulate(const KernelContext& ctx, float* acc, const void* packed, int64_t n,
                                            int64_t block) {
  constexpr const char* kKernel = "DequantizeInt8BlocksAccumulate";
  RETURN_IF_ERROR(CheckSizes(kKernel, n, block));
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckNotNull(kKernel, {{"acc", acc}}));
  RETURN_IF_ERROR(CheckPacked(kKernel, packed));
  ZS_KERNEL_DISPATCH(kKernel, ctx, cpu::DequantizeInt8BlocksAccumulate(LoopThreads(ctx), acc, packed, n, block),
                     cuda::DequantizeInt8BlocksAccumulate(ctx, acc, packed, n, block));
}

}  // namespace zeroshard::kernels
