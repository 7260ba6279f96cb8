#include "kernels/gelu.h"

#include "core/status_macros.h"
#include "kernels/checks.h"
#include "kernels/cpu/elementwise_cpu.h"
#include "kernels/cuda/launchers.h"

namespace zeroshard::kernels {

absl::Status GeluForward(const KernelContext& ctx, void* out, const void* inp, int64_t n, DType dtype) {
  RETURN_IF_ERROR(CheckCount("GeluForward", "n", n));
  RETURN_IF_ERROR(CheckComputeDType("GeluForward", dtype));
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckNotNull("GeluForward", {{"out", out}, {"inp", inp}}));
  ZS_KERNEL_DISPATCH("GeluForward", ctx, cpu::GeluForward(LoopThreads(ctx), out, inp, n, dtype),
                     cuda::GeluForward(ctx, out, inp, n, dtype));
}

absl::Status GeluBackward(const KernelContext& ctx, void* dinp, const void* inp, const void* dout, int64_t n,
                          DType dtype) {
  RETURN_IF_ERROR(CheckCount("GeluBackward", "n", n));
  RETURN_IF_ERROR(CheckComputeDType("GeluBackward", dtype));
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckNotNull("GeluBackward", {{"dinp", dinp}, {"inp", inp}, {"dout", dout}}));
  ZS_KERNEL_DISPATCH("GeluBackward", ctx, cpu::GeluBackward(LoopThreads(ctx), dinp, inp, dout, n, dtype),
                     cuda::GeluBackward(ctx, dinp, inp, dout, n, dtype));
}

}  // namespace zeroshard::kernels
