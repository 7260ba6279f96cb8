#include "kernels/layernorm.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/checks.h"
#include "kernels/cpu/layernorm_cpu.h"
#include "kernels/cuda/launchers.h"

namespace zeroshard::kernels {

absl::Status LayerNormForward(const KernelContext& ctx, void* out, float* mean, float* rstd, const void* inp,
                              const void* weight, const void* bias, int64_t rows, int64_t channels, float eps,
                              DType dtype) {
  RETURN_IF_ERROR(CheckDims("LayerNormForward", {{"rows", rows}, {"channels", channels}}));
  RETURN_IF_ERROR(CheckNotNull("LayerNormForward", {{"out", out},
                                                    {"mean", mean},
                                                    {"rstd", rstd},
                                                    {"inp", inp},
                                                    {"weight", weight},
                                                    {"bias", bias}}));
  RETURN_IF_ERROR(CheckComputeDType("LayerNormForward", dtype));
  if (!(eps > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("LayerNormForward: eps = ", eps, ", expected > 0"));
  }
  ZS_KERNEL_DISPATCH(
      "LayerNormForward", ctx,
      cpu::LayerNormForward(LoopThreads(ctx), out, mean, rstd, inp, weight, bias, rows, channels, eps, dtype),
      cuda::LayerNormForward(ctx, out, mean, rstd, inp, weight, bias, rows, channels, eps, dtype));
}

absl::Status LayerNormBackward(const KernelContext& ctx, void* dinp, void* dweight, void* dbias, const void* dout,
                               const void* inp, const void* weight, const float* mean, const float* rstd,
                               int64_t rows, int64_t channels, DType dtype) {
  RETURN_IF_ERROR(CheckDims("LayerNormBackward", {{"rows", rows}, {"channels", channels}}));
  if ((dweight == nullptr) != (dbias == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("LayerNormBackward: ", dweight == nullptr ? "dweight" : "dbias",
                                                   " is null but ", dweight == nullptr ? "dbias" : "dweight",
                                                   " is not, expected both or neither"));
  }
  if (dinp == nullptr && dweight == nullptr) {
    return absl::InvalidArgumentError("LayerNormBackward: nothing to compute (dinp, dweight and dbias are all null)");
  }
  RETURN_IF_ERROR(
      CheckNotNull("LayerNormBackward", {{"dout", dout}, {"inp", inp}, {"mean", mean}, {"rstd", rstd}}));
  if (dinp != nullptr && weight == nullptr) {
    return absl::InvalidArgumentError("LayerNormBackward: weight is null, expected non-null when dinp is set");
  }
  RETURN_IF_ERROR(CheckComputeDType("LayerNormBackward", dtype));
  ZS_KERNEL_DISPATCH("LayerNormBackward", ctx,
                     cpu::LayerNormBackward(LoopThreads(ctx), dinp, dweight, dbias, dout, inp, weight, mean, rstd,
                                            rows, channels, dtype),
                     cuda::LayerNormBackward(ctx, dinp, dweight, dbias, dout, inp, weight, mean, rstd, rows, channels,
                                             dtype));
}

}  // namespace zeroshard::kernels
