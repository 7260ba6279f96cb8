#include "kernels/linear.h"

#include "core/status_macros.h"
#include "kernels/checks.h"
#include "kernels/cpu/elementwise_cpu.h"
#include "kernels/cpu/linear_cpu.h"
#include "kernels/cuda/launchers.h"

namespace zeroshard::kernels {
namespace {

#ifdef ZEROSHARD_HAS_CUDA
// CUDA: with a bias, cuBLASLt's bias epilogue (one rounding of the output,
// as on the CPU). Where cuBLASLt does not take the case, cuBLAS GEMM and the
// bias in a second pass (bf16/f16 outputs are then rounded twice).
absl::Status LinearForwardCuda(const KernelContext& ctx, void* out, const void* inp, const void* weight,
                               const void* bias, int64_t n, int64_t c, int64_t oc, DType dtype) {
  if (bias != nullptr) {
    bool fused = false;
    RETURN_IF_ERROR(cuda::LinearLt(ctx, out, nullptr, inp, weight, bias, n, c, oc, dtype, &fused));
    if (fused) return absl::OkStatus();
  }
  RETURN_IF_ERROR(cuda::Gemm(ctx, Transpose::kNo, Transpose::kNo, n, oc, c, 1.0f, inp, c, weight, oc, 0.0f, out, oc,
                             dtype));
  if (bias != nullptr) RETURN_IF_ERROR(cuda::BiasAdd(ctx, out, bias, n, oc, dtype));
  return absl::OkStatus();
}

absl::Status LinearGeluForwardCuda(const KernelContext& ctx, void* out, void* pre, const void* inp,
                                   const void* weight, const void* bias, int64_t n, int64_t c, int64_t oc,
                                   DType dtype) {
  bool fused = false;
  RETURN_IF_ERROR(cuda::LinearLt(ctx, out, pre, inp, weight, bias, n, c, oc, dtype, &fused));
  if (fused) return absl::OkStatus();
  RETURN_IF_ERROR(LinearForwardCuda(ctx, pre, inp, weight, bias, n, c, oc, dtype));
  return cuda::GeluForward(ctx, out, pre, n * oc, dtype);
}

absl::Status LinearBackwardCuda(const KernelContext& ctx, void* dinp, void* dweight, void* dbias, const void* dout,
                                const void* inp, const void* weight, int64_t n, int64_t c, int64_t oc, DType dtype) {
  if (dinp != nullptr) {
    RETURN_IF_ERROR(cuda::Gemm(ctx, Transpose::kNo, Transpose::kYes, n, c, oc, 1.0f, dout, oc, weight, oc, 0.0f,
                               dinp, c, dtype));
  }
  if (dweight != nullptr) {
    RETURN_IF_ERROR(cuda::Gemm(ctx, Transpose::kYes, Transpose::kNo, c, oc, n, 1.0f, inp, c, dout, oc, 1.0f, dweight,
                               oc, dtype));
  }
  if (dbias != nullptr) RETURN_IF_ERROR(cuda::BiasGrad(ctx, dbias, dout, n, oc, dtype));
  return absl::OkStatus();
}
#endif

// CPU: the two calls LinearForward and GeluForward would make, so the
// results are bitwise theirs.
absl::Status LinearGeluForwardCpu(const KernelContext& ctx, void* out, void* pre, const void* inp,
                                  const void* weight, const void* bias, int64_t n, int64_t c, int64_t oc,
                                  DType dtype) {
  const int threads = LoopThreads(ctx);
  RETURN_IF_ERROR(cpu::LinearForward(threads, pre, inp, weight, bias, n, c, oc, dtype));
  const step_profile::Scope profile(step_profile::Category::kGelu);
  return cpu::GeluForward(threads, out, pre, n * oc, dtype);
}

absl::Status CheckLinear(const char* kernel, int64_t rows, int64_t in_features, int64_t out_features, DType dtype) {
  RETURN_IF_ERROR(CheckDims(kernel, {{"rows", rows}, {"in_features", in_features}, {"out_features", out_features}}));
  RETURN_IF_ERROR(
      CheckFitsInt32(kernel, {{"rows", rows}, {"in_features", in_features}, {"out_features", out_features}}));
  return CheckComputeDType(kernel, dtype);
}

}  // namespace

absl::Status LinearForward(const KernelContext& ctx, void* out, const void* inp, const void* weight,
                           const void* bias, int64_t rows, int64_t in_features, int64_t out_features, DType dtype) {
  RETURN_IF_ERROR(CheckLinear("LinearForward", rows, in_features, out_features, dtype));
  RETURN_IF_ERROR(CheckNotNull("LinearForward", {{"out", out}, {"inp", inp}, {"weight", weight}}));
  ZS_KERNEL_DISPATCH(
      "LinearForward", ctx,
      cpu::LinearForward(LoopThreads(ctx), out, inp, weight, bias, rows, in_features, out_features, dtype),
      LinearForwardCuda(ctx, out, inp, weight, bias, rows, in_features, out_features, dtype));
}

absl::Status LinearGeluForward(const KernelContext& ctx, void* out, void* pre, const void* inp,
                               const void* weight, const void* bias, int64_t rows, int64_t in_features,
                               int64_t out_features, DType dtype) {
  RETURN_IF_ERROR(CheckLinear("LinearGeluForward", rows, in_features, out_features, dtype));
  RETURN_IF_ERROR(CheckNotNull("LinearGeluForward", {{"out", out}, {"pre", pre}, {"inp", inp}, {"weight", weight}}));
  if (out == pre) return absl::InvalidArgumentError("LinearGeluForward: out and pre are the same buffer, expected two");
  ZS_KERNEL_DISPATCH(
      "LinearGeluForward", ctx,
      LinearGeluForwardCpu(ctx, out, pre, inp, weight, bias, rows, in_features, out_features, dtype),
      LinearGeluForwardCuda(ctx, out, pre, inp, weight, bias, rows, in_features, out_features, dtype));
}

absl::Status LinearBackward(const KernelContext& ctx, void* dinp, void* dweight, void* dbias, const void* dout,
                            const void* inp, const void* weight, int64_t rows, int64_t in_features,
                            int64_t out_features, DType dtype) {
  RETURN_IF_ERROR(CheckLinear("LinearBackward", rows, in_features, out_features, dtype));
  if (dinp == nullptr && dweight == nullptr && dbias == nullptr) {
    return absl::InvalidArgumentError("LinearBackward: nothing to compute (dinp, dweight and dbias are all null)");
  }
  RETURN_IF_ERROR(CheckNotNull("LinearBackward", {{"dout", dout}}));
  if (dinp != nullptr && weight == nullptr) {
    return absl::InvalidArgumentError("LinearBackward: weight is null, expected non-null when dinp is set");
  }
  if (dweight != nullptr && inp == nullptr) {
    return absl::InvalidArgumentError("LinearBackward: inp is null, expected non-null when dweight is set");
  }
  ZS_KERNEL_DISPATCH("LinearBackward", ctx,
                     cpu::LinearBackward(LoopThreads(ctx), dinp, dweight, dbias, dout, inp, weight, rows, in_features,
                                         out_features, dtype),
                     LinearBackwardCuda(ctx, dinp, dweight, dbias, dout, inp, weight, rows, in_features,
                                        out_features, dtype));
}

}  // namespace zeroshard::kernels
