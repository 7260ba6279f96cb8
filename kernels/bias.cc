#include "kernels/bias.h"

#include "core/status_macros.h"
#include "kernels/checks.h"
#include "kernels/cpu/linear_cpu.h"
#include "kernels/cuda/launchers.h"

namespace zeroshard::kernels {

absl::Status BiasAdd(const KernelContext& ctx, void* out, const void* bias, int64_t rows, int64_t cols, DType dtype) {
  RETURN_IF_ERROR(CheckDims("BiasAdd", {{"rows", rows}, {"cols", cols}}));
  RETURN_IF_ERROR(CheckNotNull("BiasAdd", {{"out", out}, {"bias", bias}}));
  RETURN_IF_ERROR(CheckComputeDType("BiasAdd", dtype));
  ZS_KERNEL_DISPATCH("BiasAdd", ctx, cpu::BiasAdd(LoopThreads(ctx), out, bias, rows, cols, dtype),
                     cuda::BiasAdd(ctx, out, bias, rows, cols, dtype));
}

absl::Status BiasGrad(const KernelContext& ctx, void* dbias, const void* dout, int64_t rows, int64_t cols,
                      DType dtype) {
  RETURN_IF_ERROR(CheckDims("BiasGrad", {{"rows", rows}, {"cols", cols}}));
  RETURN_IF_ERROR(CheckNotNull("BiasGrad", {{"dbias", dbias}, {"dout", dout}}));
  RETURN_IF_ERROR(CheckComputeDType("BiasGrad", dtype));
  ZS_KERNEL_DISPATCH("BiasGrad", ctx, cpu::BiasGrad(LoopThreads(ctx), dbias, dout, rows, cols, dtype),
                     cuda::BiasGrad(ctx, dbias, dout, rows, cols, dtype));
}

}  // namespace zeroshard::kernels
