// Lion update: one thread per element through kernels/lion_math.h.
#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/lion_launchers.h"
#include "kernels/lion_math.h"

namespace zeroshard::kernels::cuda {
namespace {

__global__ void LionKernel(float* param, const float* grad, float* m, int64_t n, LionScalars s) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    LionElement(param[i], grad[i], m[i], s);
  }
}

}  // namespace

absl::Status LionUpdate(const KernelContext& ctx, float* param, const float* grad, float* exp_avg, int64_t n,
                        const LionScalars& s) {
  LionKernel<<<GridFor(n), kThreads, 0, StreamOf(ctx)>>>(param, grad, exp_avg, n, s);
  return CheckLaunch("LionUpdate");
}

}  // namespace zeroshard::kernels::cuda
