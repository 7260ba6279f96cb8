// Optimizer updates: one thread per element through pointwise_math.h.
#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/launchers.h"
#include "kernels/pointwise_math.h"

namespace zeroshard::kernels::cuda {
namespace {

__global__ void AdamWKernel(float* param, const float* grad, float* m, float* v, int64_t n, AdamWScalars s) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    AdamWElement(param[i], grad[i], m[i], v[i], s);
  }
}

__global__ void SgdKernel(float* param, const float* grad, float* buf, int64_t n, float lr, float momentum,
                          float dampening, float weight_decay, bool nesterov, bool first_step) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    SgdElement(param[i], grad[i], buf != nullptr ? &buf[i] : nullptr, lr, momentum, dampening, weight_decay,
               nesterov, first_step);
  }
}

}  // namespace

absl::Status AdamWUpdate(const KernelContext& ctx, float* param, const float* grad, float* exp_avg,
                         float* exp_avg_sq, int64_t n, const AdamWScalars& s) {
  AdamWKernel<<<GridFor(n), kThreads, 0, StreamOf(ctx)>>>(param, grad, exp_avg, exp_avg_sq, n, s);
  return CheckLaunch("AdamWUpdate");
}

absl::Status SgdUpdate(const KernelContext& ctx, float* param, const float* grad, float* momentum_buf, int64_t n,
                       float lr, float momentum, float dampening, float weight_decay, bool nesterov,
                       bool first_step) {
  SgdKernel<<<GridFor(n), kThreads, 0, StreamOf(ctx)>>>(param, grad, momentum_buf, n, lr, momentum, dampening,
                                                        weight_decay, nesterov, first_step);
  return CheckLaunch("SgdUpdate");
}

}  // namespace zeroshard::kernels::cuda
