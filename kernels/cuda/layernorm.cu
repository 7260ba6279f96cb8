// LayerNorm: one warp per row for the row-wise parts; dweight/dbias by a
// fixed-shape column reduction (deterministic).
#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/launchers.h"
#include "kernels/float_types.h"
#include "kernels/pointwise_math.h"

namespace zeroshard::kernels::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // warps per block

template <typename T>
__global__ void LayerNormForwardKernel(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                                       const T* bias, int64_t rows, int64_t c, float eps) {
  const int64_t r = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const T* x = inp + r * c;
  float sum = 0.0f;
  for (int64_t i = lane; i < c; i += 32) sum += Load(x[i]);
  const float m = WarpSum(sum) / static_cast<float>(c);
  float sq = 0.0f;
  for (int64_t i = lane; i < c; i += 32) {
    float d = Load(x[i]) - m;
    sq += d * d;
  }
  const float s = rsqrtf(WarpSum(sq) / static_cast<float>(c) + eps);
  T* y = out + r * c;
  for (int64_t i = lane; i < c; i += 32) y[i] = Store<T>((Load(x[i]) - m) * s * Load(weight[i]) + Load(bias[i]));
  if (lane == 0) {
    mean[r] = m;
    rstd[r] = s;
  }
}

template <typename T>
__global__ void LayerNormBackwardInputKernel(T* dinp, const T* dout, const T* inp, const T* weight,
                                             const float* mean, const float* rstd, int64_t rows, int64_t c) {
  const int64_t r = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const T* x = inp + r * c;
  const T* dy = dout + r * c;
  const float m = mean[r], s = rstd[r];
  float dnorm_sum = 0.0f, dnorm_norm_sum = 0.0f;
  for (int64_t i = lane; i < c; i += 32) {
    float norm = (Load(x[i]) - m) * s;
    float dnorm = Load(dy[i]) * Load(weight[i]);
    dnorm_sum += dnorm;
    dnorm_norm_sum += dnorm * norm;
  }
  const float dnorm_mean = WarpSum(dnorm_sum) / static_cast<float>(c);
  const float dnorm_norm_mean = WarpSum(dnorm_norm_sum) / static_cast<float>(c);
  T* dx = dinp + r * c;
  for (int64_t i = lane; i < c; i += 32) {
    float norm = (Load(x[i]) - m) * s;
    dx[i] = Store<T>(LayerNormInputGrad(Load(dy[i]) * Load(weight[i]), norm, s, dnorm_mean, dnorm_norm_mean));
  }
}

// Block (32, 16) per 32 columns, as BiasGradKernel.
template <typename T>
__global__ void LayerNormBackwardParamKernel(T* dweight, T* dbias, const T* dout, const T* inp, const float* mean,
                                             const float* rstd, int64_t rows, int64_t c) {
  __shared__ float pw[16][32];
  __shared__ float pb[16][32];
  const int64_t col = blockIdx.x * int64_t{32} + threadIdx.x;
  float aw = 0.0f, ab = 0.0f;
  if (col < c) {
    for (int64_t r = threadIdx.y; r < rows; r += 16) {
      float g = Load(dout[r * c + col]);
      aw += g * ((Load(inp[r * c + col]) - mean[r]) * rstd[r]);
      ab += g;
    }
  }
  pw[threadIdx.y][threadIdx.x] = aw;
  pb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && col < c) {
    float sw = 0.0f, sb = 0.0f;
    for (int y = 0; y < 16; ++y) {
      sw += pw[y][threadIdx.x];
      sb += pb[y][threadIdx.x];
    }
    dweight[col] = Store<T>(Load(dweight[col]) + sw);
    dbias[col] = Store<T>(Load(dbias[col]) + sb);
  }
}

}  // namespace

absl::Status LayerNormForward(const KernelContext& ctx, void* out, float* mean, float* rstd, const void* inp,
                              const void* weight, const void* bias, int64_t rows, int64_t channels, float eps,
                              DType dtype) {
  return DispatchFloatDType(dtype, "LayerNormForward", [&](auto tag) {
    using T = decltype(tag);
    unsigned grid = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
    LayerNormForwardKernel<T><<<grid, 32 * kRowsPerBlock, 0, StreamOf(ctx)>>>(
        static_cast<T*>(out), mean, rstd, static_cast<const T*>(inp), static_cast<const T*>(weight),
        static_cast<const T*>(bias), rows, channels, eps);
    return CheckLaunch("LayerNormForward");
  });
}

absl::Status LayerNormBackward(const KernelContext& ctx, void* dinp, void* dweight, void* dbias, const void* dout,
                               const void* inp, const void* weight, const float* mean, const float* rstd,
                               int64_t rows, int64_t channels, DType dtype) {
  return DispatchFloatDType(dtype, "LayerNormBackward", [&](auto tag) {
    using T = decltype(tag);
    // Two independent kernels: either part may be skipped (null) without
    // changing the other.
    if (dinp != nullptr) {
      unsigned grid = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
      LayerNormBackwardInputKernel<T><<<grid, 32 * kRowsPerBlock, 0, StreamOf(ctx)>>>(
          static_cast<T*>(dinp), static_cast<const T*>(dout), static_cast<const T*>(inp),
          static_cast<const T*>(weight), mean, rstd, rows, channels);
      absl::Status s = CheckLaunch("LayerNormBackward (input)");
      if (!s.ok()) return s;
    }
    if (dweight == nullptr) return absl::OkStatus();
    dim3 block(32, 16);
    unsigned grid_c = static_cast<unsigned>((channels + 31) / 32);
    LayerNormBackwardParamKernel<T><<<grid_c, block, 0, StreamOf(ctx)>>>(
        static_cast<T*>(dweight), static_cast<T*>(dbias), static_cast<const T*>(dout), static_cast<const T*>(inp),
        mean, rstd, rows, channels);
    return CheckLaunch("LayerNormBackward (params)");
  });
}

}  // namespace zeroshard::kernels::cuda
