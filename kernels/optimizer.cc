#include "kernels/optimizer.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/checks.h"
#include "kernels/cpu/optimizer_cpu.h"
#include "kernels/cuda/launchers.h"
#include "kernels/pointwise_math.h"

namespace zeroshard::kernels {
namespace {

// The double a user meant by an f32 hyperparameter: its shortest decimal
// form read back as a double (0.999f -> 0.999). PyTorch derives its
// constants (1 - beta2, lr / bias_correction) from Python doubles, so this
// reproduces them instead of inheriting the f32 representation error.
double IntendedDouble(float f) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf) - 1, f);
  if (ec != std::errc()) return f;
  *end = '\0';
  return std::strtod(buf, nullptr);
}

}  // namespace

absl::Status AdamWUpdate(const KernelContext& ctx, float* param, const float* grad, float* exp_avg,
                         float* exp_avg_sq, int64_t n, const AdamWHyper& h) {
  RETURN_IF_ERROR(CheckCount("AdamWUpdate", "n", n));
  if (h.step < 1) {
    return absl::InvalidArgumentError(absl::StrCat("AdamWUpdate: step = ", h.step, ", expected >= 1 (1-based)"));
  }
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckNotNull("AdamWUpdate",
                               {{"param", param}, {"grad", grad}, {"exp_avg", exp_avg}, {"exp_avg_sq", exp_avg_sq}}));
  // Scalars in double, as PyTorch computes them with Python floats.
  const double lr = IntendedDouble(h.lr), beta1 = IntendedDouble(h.beta1), beta2 = IntendedDouble(h.beta2);
  const double step = static_cast<double>(h.step);
  const double bias_correction1 = 1.0 - std::pow(beta1, step);
  const double bias_correction2 = 1.0 - std::pow(beta2, step);
  AdamWScalars s;
  s.decay_factor = static_cast<float>(1.0 - lr * IntendedDouble(h.weight_decay));
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  s.beta2 = h.beta2;
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  s.step_size = static_cast<float>(lr / bias_correction1);
  s.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  s.eps = h.eps;
  switch (ctx.device) {
    case Device::kCpu: {
      const step_profile::Scope profile(step_profile::Category::kOptimizer);
      cpu::AdamWUpdate(LoopThreads(ctx), param, grad, exp_avg, exp_avg_sq, n, s);
      return absl::OkStatus();
    }
    case Device::kCuda:
#ifdef ZEROSHARD_HAS_CUDA
      return cuda::AdamWUpdate(ctx, param, grad, exp_avg, exp_avg_sq, n, s);
#else
      return NoCudaError("AdamWUpdate");
#endif
  }
  return UnknownDeviceError("AdamWUpdate", ctx.device);
}

absl::Status SgdUpdate(const KernelContext& ctx, float* param, const float* grad, float* momentum_buf, int64_t n,
                       const SgdHyper& h) {
  RETURN_IF_ERROR(CheckCount("SgdUpdate", "n", n));
  if (h.nesterov && (h.momentum <= 0.0f || h.dampening != 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("SgdUpdate: nesterov needs momentum > 0 and dampening == 0, got momentum = ",
                                                   h.momentum, ", dampening = ", h.dampening));
  }
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckNotNull("SgdUpdate", {{"param", param}, {"grad", grad}}));
  if (h.momentum != 0.0f) RETURN_IF_ERROR(CheckNotNull("SgdUpdate (momentum != 0)", {{"momentum_buf", momentum_buf}}));
  switch (ctx.device) {
    case Device::kCpu:
      cpu::SgdUpdate(LoopThreads(ctx), param, grad, h.momentum != 0.0f ? momentum_buf : nullptr, n, h.lr, h.momentum,
                     h.dampening, h.weight_decay, h.nesterov, h.first_step);
      return absl::OkStatus();
    case Device::kCuda:
#ifdef ZEROSHARD_HAS_CUDA
      return cuda::SgdUpdate(ctx, param, grad, h.momentum != 0.0f ? momentum_buf : nullptr, n, h.lr, h.momentum,
                             h.dampening, h.weight_decay, h.nesterov, h.first_step);
#else
      return NoCudaError("SgdUpdate");
#endif
  }
  return UnknownDeviceError("SgdUpdate", ctx.device);
}

}  // namespace zeroshard::kernels
