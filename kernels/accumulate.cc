#include "kernels/accumulate.h"

#include "core/status_macros.h"
#include "kernels/checks.h"
#include "kernels/cpu/elementwise_cpu.h"
#include "kernels/cuda/launchers.h"

namespace zeroshard::kernels {

absl::Status AccumulateInto(const KernelContext& ctx, float* dst, const void* src, DType src_dtype, int64_t n) {
  RETURN_IF_ERROR(CheckCount("AccumulateInto", "n", n));
  RETURN_IF_ERROR(CheckComputeDType("AccumulateInto (src_dtype)", src_dtype));
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckNotNull("AccumulateInto", {{"dst", dst}, {"src", src}}));
  ZS_KERNEL_DISPATCH("AccumulateInto", ctx, cpu::AccumulateInto(LoopThreads(ctx), dst, src, src_dtype, n),
                     cuda::AccumulateInto(ctx, dst, src, src_dtype, n));
}

}  // namespace zeroshard::kernels
