#include "kernels/cast.h"

#include "core/status_macros.h"
#include "kernels/checks.h"
#include "kernels/cpu/elementwise_cpu.h"
#include "kernels/cuda/launchers.h"

namespace zeroshard::kernels {

absl::Status Cast(const KernelContext& ctx, void* out, DType out_dtype, const void* in, DType in_dtype, int64_t n) {
  RETURN_IF_ERROR(CheckCount("Cast", "n", n));
  RETURN_IF_ERROR(CheckComputeDType("Cast (in_dtype)", in_dtype));
  RETURN_IF_ERROR(CheckComputeDType("Cast (out_dtype)", out_dtype));
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckNotNull("Cast", {{"out", out}, {"in", in}}));
  ZS_KERNEL_DISPATCH("Cast", ctx, cpu::Cast(LoopThreads(ctx), out, out_dtype, in, in_dtype, n),
                     cuda::Cast(ctx, out, out_dtype, in, in_dtype, n));
}

}  // namespace zeroshard::kernels
