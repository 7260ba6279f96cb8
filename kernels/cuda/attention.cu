// Causal attention, written for clarity rather than speed: one thread per
// score or per output element, one warp per softmax row. Every output has a
// single writer and a fixed summation order, so results are repeatable.
#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/launchers.h"
#include "kernels/float_types.h"
#include "kernels/pointwise_math.h"

namespace zeroshard::kernels::cuda {
namespace {

struct Dims {
  int64_t b, t, c, nh, hs;
};

// Element (b, t, h, d) of q (which = 0), k (1) or v (2) in qkv (B,T,3C).
__device__ inline int64_t QkvIndex(const Dims& d, int64_t b, int64_t t, int which, int64_t h, int64_t i) {
  return (b * d.t + t) * 3 * d.c + which * d.c + h * d.hs + i;
}

// att[b,h,t,j] = scale * q_t · k_j for j <= t (the rest is set by the softmax).
template <typename T>
__global__ void ScoresKernel(float* att, const T* qkv, Dims d, float scale) {
  const int64_t n = d.b * d.nh * d.t * d.t;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < n; idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t j = idx % d.t, t = (idx / d.t) % d.t, h = (idx / (d.t * d.t)) % d.nh, b = idx / (d.t * d.t * d.nh);
    if (j > t) continue;
    float acc = 0.0f;
    for (int64_t i = 0; i < d.hs; ++i) {
      acc += Load(qkv[QkvIndex(d, b, t, 0, h, i)]) * Load(qkv[QkvIndex(d, b, j, 1, h, i)]);
    }
    att[idx] = acc * scale;
  }
}

// One warp per row (b,h,t): causal softmax in place, zeros above the diagonal.
__global__ void SoftmaxKernel(float* att, int64_t rows, int64_t t_len) {
  const int64_t row = blockIdx.x * int64_t{blockDim.x / 32} + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int64_t t = row % t_len;
  float* p = att + row * t_len;
  float mx = -INFINITY;
  for (int64_t j = lane; j <= t; j += 32) mx = fmaxf(mx, p[j]);
  mx = WarpMax(mx);
  float sum = 0.0f;
  for (int64_t j = lane; j <= t; j += 32) {
    float e = expf(p[j] - mx);
    p[j] = e;
    sum += e;
  }
  const float inv = 1.0f / WarpSum(sum);
  for (int64_t j = lane; j < t_len; j += 32) p[j] = j <= t ? p[j] * inv : 0.0f;
}

// out[b,t,h*hs+i] = sum_{j<=t} att[b,h,t,j] * v[b,j,h,i].
template <typename T>
__global__ void ValuesKernel(T* out, const float* att, const T* qkv, Dims d) {
  const int64_t n = d.b * d.t * d.c;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < n; idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t ch = idx % d.c, t = (idx / d.c) % d.t, b = idx / (d.c * d.t);
    const int64_t h = ch / d.hs, i = ch % d.hs;
    const float* p = att + ((b * d.nh + h) * d.t + t) * d.t;
    float acc = 0.0f;
    for (int64_t j = 0; j <= t; ++j) acc += p[j] * Load(qkv[QkvIndex(d, b, j, 2, h, i)]);
    out[idx] = Store<T>(acc);
  }
}

// datt[b,h,t,j] = dout_t · v_j for j <= t, else 0.
template <typename T>
__global__ void DAttKernel(float* datt, const T* dout, const T* qkv, Dims d) {
  const int64_t n = d.b * d.nh * d.t * d.t;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < n; idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t j = idx % d.t, t = (idx / d.t) % d.t, h = (idx / (d.t * d.t)) % d.nh, b = idx / (d.t * d.t * d.nh);
    float acc = 0.0f;
    if (j <= t) {
      for (int64_t i = 0; i < d.hs; ++i) {
        acc += Load(dout[(b * d.t + t) * d.c + h * d.hs + i]) * Load(qkv[QkvIndex(d, b, j, 2, h, i)]);
      }
    }
    datt[idx] = acc;
  }
}

// One warp per row: dscores = p * (datt - sum p*datt) * scale, in place.
__global__ void SoftmaxBackwardKernel(float* datt, const float* att, int64_t rows, int64_t t_len, float scale) {
  const int64_t row = blockIdx.x * int64_t{blockDim.x / 32} + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int64_t t = row % t_len;
  const float* p = att + row * t_len;
  float* d = datt + row * t_len;
  float dot = 0.0f;
  for (int64_t j = lane; j <= t; j += 32) dot += p[j] * d[j];
  dot = WarpSum(dot);
  for (int64_t j = lane; j < t_len; j += 32) d[j] = j <= t ? SoftmaxInputGrad(p[j], d[j], dot) * scale : 0.0f;
}

// dq[t] = sum_{j<=t} ds[t,j] k[j];  dk[j] = sum_{t>=j} ds[t,j] q[t];  dv[j] = sum_{t>=j} p[t,j] dout[t].
template <typename T>
__global__ void DQkvKernel(T* dqkv, const float* ds, const float* att, const T* dout, const T* qkv, Dims d) {
  const int64_t n = d.b * d.t * 3 * d.c;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < n; idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t ch3 = idx % (3 * d.c), t = (idx / (3 * d.c)) % d.t, b = idx / (3 * d.c * d.t);
    const int which = static_cast<int>(ch3 / d.c);
    const int64_t ch = ch3 % d.c, h = ch / d.hs, i = ch % d.hs;
    const int64_t base = (b * d.nh + h) * d.t * d.t;
    float acc = 0.0f;
    if (which == 0) {
      for (int64_t j = 0; j <= t; ++j) acc += ds[base + t * d.t + j] * Load(qkv[QkvIndex(d, b, j, 1, h, i)]);
    } else if (which == 1) {
      for (int64_t s = t; s < d.t; ++s) acc += ds[base + s * d.t + t] * Load(qkv[QkvIndex(d, b, s, 0, h, i)]);
    } else {
      for (int64_t s = t; s < d.t; ++s) acc += att[base + s * d.t + t] * Load(dout[(b * d.t + s) * d.c + h * d.hs + i]);
    }
    dqkv[idx] = Store<T>(acc);
  }
}

}  // namespace

absl::Status AttentionForward(const KernelContext& ctx, void* out, float* att, const void* qkv, int64_t batch,
                              int64_t seq_len, int64_t channels, int64_t num_heads, DType dtype) {
  return DispatchFloatDType(dtype, "AttentionForward", [&](auto tag) {
    using T = decltype(tag);
    const Dims d{batch, seq_len, channels, num_heads, channels / num_heads};
    const float scale = 1.0f / sqrtf(static_cast<float>(d.hs));
    cudaStream_t stream = StreamOf(ctx);
    const int64_t rows = batch * num_heads * seq_len;
    ScoresKernel<T><<<GridFor(rows * seq_len), kThreads, 0, stream>>>(att, static_cast<const T*>(qkv), d, scale);
    absl::Status s = CheckLaunch("AttentionForward (scores)");
    if (!s.ok()) return s;
    SoftmaxKernel<<<static_cast<unsigned>((rows + 7) / 8), 256, 0, stream>>>(att, rows, seq_len);
    s = CheckLaunch("AttentionForward (softmax)");
    if (!s.ok()) return s;
    ValuesKernel<T><<<GridFor(batch * seq_len * channels), kThreads, 0, stream>>>(
        static_cast<T*>(out), att, static_cast<const T*>(qkv), d);
    return CheckLaunch("AttentionForward (values)");
  });
}

absl::Status AttentionBackward(const KernelContext& ctx, void* dqkv, float* scratch, const void* dout,
                               const void* qkv, const float* att, int64_t batch, int64_t seq_len, int64_t channels,
                               int64_t num_heads, DType dtype) {
  return DispatchFloatDType(dtype, "AttentionBackward", [&](auto tag) {
    using T = decltype(tag);
    const Dims d{batch, seq_len, channels, num_heads, channels / num_heads};
    const float scale = 1.0f / sqrtf(static_cast<float>(d.hs));
    cudaStream_t stream = StreamOf(ctx);
    const int64_t rows = batch * num_heads * seq_len;
    DAttKernel<T><<<GridFor(rows * seq_len), kThreads, 0, stream>>>(scratch, static_cast<const T*>(dout),
                                                                    static_cast<const T*>(qkv), d);
    absl::Status s = CheckLaunch("AttentionBackward (datt)");
    if (!s.ok()) return s;
    SoftmaxBackwardKernel<<<static_cast<unsigned>((rows + 7) / 8), 256, 0, stream>>>(scratch, att, rows, seq_len,
                                                                                     scale);
    s = CheckLaunch("AttentionBackward (softmax)");
    if (!s.ok()) return s;
    DQkvKernel<T><<<GridFor(batch * seq_len * 3 * channels), kThreads, 0, stream>>>(
        static_cast<T*>(dqkv), scratch, att, static_cast<const T*>(dout), static_cast<const T*>(qkv), d);
    return CheckLaunch("AttentionBackward (dqkv)");
  });
}

}  // namespace zeroshard::kernels::cuda
