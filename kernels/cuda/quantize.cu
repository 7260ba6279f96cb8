// Int8 block quantization (kernels/quantize.h). Scales: one thread block per
// quantization block (fixed-shape max reduction; a max is exact, so this
// matches the CPU whatever the order). Values, residuals and dequantization:
// one thread per element with the shared math of kernels/quantize_math.h, so
// every byte equals the CPU's.
#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/quantize_launchers.h"
#include "kernels/float_types.h"
#include "kernels/quantize_math.h"

namespace zeroshard::kernels::cuda {
namespace {

#define ZS_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

constexpr unsigned long long kNoElement = ~0ull;

template <typename T>
__device__ inline float Compensated(const T* x, const float* residual, int64_t i) {
  return residual == nullptr ? Load(x[i]) : QuantAdd(Load(x[i]), residual[i]);
}

// scales[b] = amax / 127, or NaN for a block holding inf/NaN. first_bad
// (null: not wanted) gets the lowest index of a non-finite element.
template <typename T>
__global__ void ScalesKernel(float* scales, const T* x, const float* residual, int64_t n, int64_t block, int64_t blocks,
                             unsigned long long* first_bad) {
  __shared__ float shared[32];
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const int64_t i0 = b * block, i1 = i0 + block < n ? i0 + block : n;
    float amax = 0.0f;
    int finite = 1;
    for (int64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
      const float c = Compensated(x, residual, i);
      if (!QuantFinite(c)) {
        finite = 0;
        if (first_bad != nullptr) atomicMin(first_bad, static_cast<unsigned long long>(i));
      } else {
        amax = fmaxf(amax, fabsf(c));
      }
    }
    amax = BlockMax(amax, shared);
    const int any_bad = __syncthreads_or(!finite);
    if (threadIdx.x == 0) scales[b] = any_bad ? QuantNonFiniteScale() : QuantScale(amax);
  }
}

// q (and the padding up to the scales) from the scales; residual rewritten
// for finite blocks.
template <typename T>
__global__ void ValuesKernel(int8_t* q, const float* scales, const T* x, float* residual, int64_t n, int64_t block) {
  const int64_t padded = Int8ScalesOffset(n);
  ZS_GRID_STRIDE(i, padded) {
    if (i >= n) {
      q[i] = 0;
      continue;
    }
    const float s = scales[i / block];
    if (s != s) {
      q[i] = 0;
      continue;
    }
    const float c = Compensated(x, residual, i);
    const int8_t v = QuantValue(c, s);
    q[i] = v;
    if (residual != nullptr) residual[i] = QuantSub(c, QuantDequant(v, s));
  }
}

template <typename T>
__global__ void DequantKernel(T* out, const int8_t* q, const float* scales, int64_t n, int64_t block) {
  ZS_GRID_STRIDE(i, n) { out[i] = Store<T>(QuantDequant(q[i], scales[i / block])); }
}

__global__ void DequantAccumulateKernel(float* acc, const int8_t* q, const float* scales, int64_t n, int64_t block) {
  ZS_GRID_STRIDE(i, n) { acc[i] = QuantAdd(acc[i], QuantDequant(q[i], scales[i / block])); }
}

// Threads per scale block: the quantization block rounded up to a warp, at most kThreads.
int ScaleThreads(int64_t block) {
  const int64_t warps = (std::min<int64_t>(block, kThreads) + 31) / 32;
  return static_cast<int>(warps * 32);
}

float* ScalesOf(void* packed, int64_t n) {
  return reinterpret_cast<float*>(static_cast<char*>(packed) + Int8ScalesOffset(n));
}
const float* ScalesOf(const void* packed, int64_t n) {
  return reinterpret_cast<const float*>(static_cast<const char*>(packed) + Int8ScalesOffset(n));
}

// The kReject error for element i, read back from the device.
template <typename T>
absl::Status NonFiniteError(const KernelContext& ctx, const T* x, const float* residual, int64_t i, int64_t n,
                            int64_t block) {
  cudaStream_t stream = StreamOf(ctx);
  T value;
  float r = 0.0f;
  if (absl::Status s = CudaStatus("QuantizeInt8Blocks (read element)",
                                  cudaMemcpyAsync(&value, x + i, sizeof(T), cudaMemcpyDeviceToHost, stream));
      !s.ok()) {
    return s;
  }
  if (residual != nullptr) {
    if (absl::Status s = CudaStatus("QuantizeInt8Blocks (read residual)",
                                    cudaMemcpyAsync(&r, residual + i, sizeof(float), cudaMemcpyDeviceToHost, stream));
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = CudaStatus("QuantizeInt8Blocks (sync)", cudaStreamSynchronize(stream)); !s.ok()) return s;
  const float c = residual == nullptr ? Load(value) : QuantAdd(Load(value), r);
  return QuantNonFiniteError(i, n, c, i / block);
}

}  // namespace

absl::Status QuantizeInt8Blocks(const KernelContext& ctx, void* packed, const void* in, DType in_dtype, int64_t n,
                                int64_t block, bool reject_non_finite, float* residual) {
  unsigned long long* first_bad = nullptr;
  if (reject_non_finite) {
    absl::Status ws = RequireWorkspace("QuantizeInt8Blocks", ctx);
    if (!ws.ok()) return ws;
    first_bad = static_cast<unsigned long long*>(ctx.cuda_workspace);
  }
  cudaStream_t stream = StreamOf(ctx);
  return DispatchFloatDType(in_dtype, "QuantizeInt8Blocks", [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in);
    float* scales = ScalesOf(packed, n);
    const int64_t blocks = (n + block - 1) / block;
    if (first_bad != nullptr) {
      absl::Status s = CudaStatus("QuantizeInt8Blocks (clear flag)",
                                  cudaMemsetAsync(first_bad, 0xff, sizeof(unsigned long long), stream));
      if (!s.ok()) return s;
    }
    ScalesKernel<T>
        <<<GridFor(blocks, 1), ScaleThreads(block), 0, stream>>>(scales, x, residual, n, block, blocks, first_bad);
    absl::Status s = CheckLaunch("QuantizeInt8Blocks (scales)");
    if (!s.ok()) return s;
    if (first_bad != nullptr) {
      // Read the mark before writing anything of residual: a rejected call leaves it untouched.
      unsigned long long bad = kNoElement;
      if (absl::Status read = CudaStatus("QuantizeInt8Blocks (read flag)", cudaMemcpyAsync(&bad, first_bad, sizeof(bad),
                                                                                        cudaMemcpyDeviceToHost, stream));
          !read.ok()) {
        return read;
      }
      if (absl::Status sync = CudaStatus("QuantizeInt8Blocks (sync)", cudaStreamSynchronize(stream)); !sync.ok()) {
        return sync;
      }
      if (bad != kNoElement) return NonFiniteError(ctx, x, residual, static_cast<int64_t>(bad), n, block);
    }
    ValuesKernel<T><<<GridFor(Int8ScalesOffset(n)), kThreads, 0, stream>>>(static_cast<int8_t*>(packed), scales, x,
                                                                           residual, n, block);
    return CheckLaunch("QuantizeInt8Blocks (values)");
  });
}

absl::Status DequantizeInt8Blocks(const KernelContext& ctx, void* out, DType out_dtype, const void* packed, int64_t n,
                                  int64_t block) {
  return DispatchFloatDType(out_dtype, "DequantizeInt8Blocks", [&](auto tag) {
    using T = decltype(tag);
    DequantKernel<T><<<GridFor(n), kThreads, 0, StreamOf(ctx)>>>(
        static_cast<T*>(out), static_cast<const int8_t*>(packed), ScalesOf(packed, n), n, block);
    return CheckLaunch("DequantizeInt8Blocks");
  });
}

absl::Status DequantizeInt8BlocksAccumulate(const KernelContext& ctx, float* acc, const void* packed, int64_t n,
                                            int64_t block) {
  DequantAccumulateKernel<<<GridFor(n), kThreads, 0, StreamOf(ctx)>>>(acc, static_cast<const int8_t*>(packed),
                                                                      ScalesOf(packed, n), n, block);
  return CheckLaunch("DequantizeInt8BlocksAccumulate");
}

}  // namespace zeroshard::kernels::cuda
