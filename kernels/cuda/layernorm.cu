// LayerNorm: one warp per row for the row-wise parts; dweight/dbias by a
// fixed-shape column reduction (deterministic).
//
// For C <= 1024 the row lives in registers (element i = lane + 32*k), so the
// forward and the input gradient read each input element from global memory
// once. Its lane-strided sums add in the same order as the loop kernels that
// remain for larger C.
#include <type_traits>

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

// Register-row versions: kPerLane elements per lane, 32 * kPerLane >= c.
template <typename T, int kPerLane>
__global__ void __launch_bounds__(32 * kRowsPerBlock)
    LayerNormForwardRowKernel(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias,
                              int64_t rows, int c, float eps) {
  const int64_t r = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;  // whole warps only
  const T* x = inp + r * c;
  float v[kPerLane];
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int i = lane + 32 * k;
    v[k] = i < c ? Load(x[i]) : 0.0f;
  }
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    if (lane + 32 * k < c) sum += v[k];
  }
  const float m = WarpSum(sum) / static_cast<float>(c);
  float sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    if (lane + 32 * k < c) {
      float d = v[k] - m;
      sq += d * d;
    }
  }
  const float s = rsqrtf(WarpSum(sq) / static_cast<float>(c) + eps);
  T* y = out + r * c;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int i = lane + 32 * k;
    if (i < c) y[i] = Store<T>((v[k] - m) * s * Load(weight[i]) + Load(bias[i]));
  }
  if (lane == 0) {
    mean[r] = m;
    rstd[r] = s;
  }
}

// Holds norm and dout*weight (what the second pass needs) instead of x and dy.
template <typename T, int kPerLane>
__global__ void __launch_bounds__(32 * kRowsPerBlock)
    LayerNormBackwardInputRowKernel(T* dinp, const T* dout, const T* inp, const T* weight, const float* mean,
                                    const float* rstd, int64_t rows, int c) {
  const int64_t r = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const T* x = inp + r * c;
  const T* dy = dout + r * c;
  const float m = mean[r], s = rstd[r];
  float norm[kPerLane], dnorm[kPerLane];
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int i = lane + 32 * k;
    norm[k] = i < c ? (Load(x[i]) - m) * s : 0.0f;
    dnorm[k] = i < c ? Load(dy[i]) * Load(weight[i]) : 0.0f;
  }
  float dnorm_sum = 0.0f, dnorm_norm_sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    if (lane + 32 * k < c) {
      dnorm_sum += dnorm[k];
      dnorm_norm_sum += dnorm[k] * norm[k];
    }
  }
  const float dnorm_mean = WarpSum(dnorm_sum) / static_cast<float>(c);
  const float dnorm_norm_mean = WarpSum(dnorm_norm_sum) / static_cast<float>(c);
  T* dx = dinp + r * c;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int i = lane + 32 * k;
    if (i < c) dx[i] = Store<T>(LayerNormInputGrad(dnorm[k], norm[k], s, dnorm_mean, dnorm_norm_mean));
  }
}

// Calls fn(std::integral_constant<int, K>) for the smallest K in
// {1, 2, 4, 8, 16, 24, 32} with 32 * K >= c and returns true; false when
// c > 1024 (the caller uses the loop kernels).
template <typename Fn>
bool WithElementsPerLane(int64_t c, Fn&& fn) {
  if (c <= 32) return fn(std::integral_constant<int, 1>{}), true;
  if (c <= 64) return fn(std::integral_constant<int, 2>{}), true;
  if (c <= 128) return fn(std::integral_constant<int, 4>{}), true;
  if (c <= 256) return fn(std::integral_constant<int, 8>{}), true;
  if (c <= 512) return fn(std::integral_constant<int, 16>{}), true;
  if (c <= 768) return fn(std::integral_constant<int, 24>{}), true;
  if (c <= 1024) return fn(std::integral_constant<int, 32>{}), true;
  return false;
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
    const bool in_registers = WithElementsPerLane(channels, [&](auto per_lane) {
      LayerNormForwardRowKernel<T, decltype(per_lane)::value><<<grid, 32 * kRowsPerBlock, 0, StreamOf(ctx)>>>(
          static_cast<T*>(out), mean, rstd, static_cast<const T*>(inp), static_cast<const T*>(weight),
          static_cast<const T*>(bias), rows, static_cast<int>(channels), eps);
    });
    if (!in_registers) {
      LayerNormForwardKernel<T><<<grid, 32 * kRowsPerBlock, 0, StreamOf(ctx)>>>(
          static_cast<T*>(out), mean, rstd, static_cast<const T*>(inp), static_cast<const T*>(weight),
          static_cast<const T*>(bias), rows, channels, eps);
    }
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
      const bool in_registers = WithElementsPerLane(channels, [&](auto per_lane) {
        LayerNormBackwardInputRowKernel<T, decltype(per_lane)::value><<<grid, 32 * kRowsPerBlock, 0,
                                                                          StreamOf(ctx)>>>(
            static_cast<T*>(dinp), static_cast<const T*>(dout), static_cast<const T*>(inp),
            static_cast<const T*>(weight), mean, rstd, rows, static_cast<int>(channels));
      });
      if (!in_registers) {
        LayerNormBackwardInputKernel<T><<<grid, 32 * kRowsPerBlock, 0, StreamOf(ctx)>>>(
            static_cast<T*>(dinp), static_cast<const T*>(dout), static_cast<const T*>(inp),
            static_cast<const T*>(weight), mean, rstd, rows, channels);
      }
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
