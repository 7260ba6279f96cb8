#include "kernels/lion.h"

#include "core/status_macros.h"
#include "kernels/checks.h"
#include "kernels/cpu/lion_cpu.h"
#include "kernels/cuda/lion_launchers.h"
#include "kernels/lion_math.h"

namespace zeroshard::kernels {

absl::Status LionUpdate(const KernelContext& ctx, float* param, const float* grad, float* exp_avg, int64_t n,
                        const LionHyper& h) {
  constexpr const char* kKernel = "LionUpdate";
  RETURN_IF_ERROR(CheckCount(kKernel, "n", n));
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckNotNull(kKernel, {{"param", param}, {"grad", grad}, {"exp_avg", exp_avg}}));
  const LionScalars s{h.lr, h.beta1, 1.0f - h.beta1, h.beta2, 1.0f - h.beta2, h.weight_decay};
  ZS_KERNEL_DISPATCH(kKernel, ctx, (cpu::LionUpdate(LoopThreads(ctx), param, grad, exp_avg, n, s), absl::OkStatus()),
                     cuda::LionUpdate(ctx, param, grad, exp_avg, n, s));
}

}  // namespace zeroshard::kernels
