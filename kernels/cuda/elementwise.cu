// Element-wise CUDA kernels (GELU, residual, cast, widening accumulation,
// scale) and the sum of squares. The per-element math is kernels/pointwise_math.h, shared with CPU.
#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/launchers.h"
#include "kernels/float_types.h"
#include "kernels/pointwise_math.h"

namespace zeroshard::kernels::cuda {
namespace {

#define ZS_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

template <typename T>
__global__ void GeluForwardKernel(T* out, const T* inp, int64_t n) {
  ZS_GRID_STRIDE(i, n) { out[i] = Store<T>(GeluTanh(Load(inp[i]))); }
}

template <typename T>
__global__ void GeluBackwardKernel(T* dinp, const T* inp, const T* dout, int64_t n) {
  ZS_GRID_STRIDE(i, n) { dinp[i] = Store<T>(GeluTanhGrad(Load(inp[i])) * Load(dout[i])); }
}

template <typename T>
__global__ void AddKernel(T* out, const T* a, const T* b, int64_t n) {
  ZS_GRID_STRIDE(i, n) { out[i] = Store<T>(Load(a[i]) + Load(b[i])); }
}

template <typename In, typename Out>
__global__ void CastKernel(Out* out, const In* in, int64_t n) {
  ZS_GRID_STRIDE(i, n) { out[i] = Store<Out>(Load(in[i])); }
}

template <typename T>
__global__ void AccumulateKernel(float* dst, const T* src, int64_t n) {
  ZS_GRID_STRIDE(i, n) { dst[i] += Load(src[i]); }
}

template <typename T>
__global__ void ScaleKernel(T* x, int64_t n, float scale, int* found) {
  bool bad = false;
  ZS_GRID_STRIDE(i, n) {
    T v = Store<T>(Load(x[i]) * scale);
    x[i] = v;
    bad |= !isfinite(Load(v));
  }
  if (bad && found != nullptr) *found = 1;  // every writer writes 1: the race is benign
}

constexpr int kSumBlocks = 256;

// Fixed grid: block b sums elements b*256+tid, stepping by the grid, in f64;
// the block total goes to partial[b]. Same partition for every n, so repeatable.
template <typename T>
__global__ void SumSquaresPartialKernel(const T* x, int64_t n, double* partial) {
  __shared__ double shared[32];
  double acc = 0.0;
  ZS_GRID_STRIDE(i, n) {
    double v = Load(x[i]);
    acc += v * v;
  }
  double total = BlockSum(acc, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

__global__ void SumPartialsKernel(const double* partial, int count, double* result) {
  double total = 0.0;
  for (int i = 0; i < count; ++i) total += partial[i];
  *result = total;
}

}  // namespace

absl::Status GeluForward(const KernelContext& ctx, void* out, const void* inp, int64_t n, DType dtype) {
  return DispatchFloatDType(dtype, "GeluForward", [&](auto tag) {
    using T = decltype(tag);
    GeluForwardKernel<T><<<GridFor(n), kThreads, 0, StreamOf(ctx)>>>(static_cast<T*>(out),
                                                                      static_cast<const T*>(inp), n);
    return CheckLaunch("GeluForward");
  });
}

absl::Status GeluBackward(const KernelContext& ctx, void* dinp, const void* inp, const void* dout, int64_t n,
                          DType dtype) {
  return DispatchFloatDType(dtype, "GeluBackward", [&](auto tag) {
    using T = decltype(tag);
    GeluBackwardKernel<T><<<GridFor(n), kThreads, 0, StreamOf(ctx)>>>(
        static_cast<T*>(dinp), static_cast<const T*>(inp), static_cast<const T*>(dout), n);
    return CheckLaunch("GeluBackward");
  });
}

absl::Status ResidualForward(const KernelContext& ctx, void* out, const void* a, const void* b, int64_t n,
                             DType dtype) {
  return DispatchFloatDType(dtype, "ResidualForward", [&](auto tag) {
    using T = decltype(tag);
    AddKernel<T><<<GridFor(n), kThreads, 0, StreamOf(ctx)>>>(static_cast<T*>(out), static_cast<const T*>(a),
                                                             static_cast<const T*>(b), n);
    return CheckLaunch("ResidualForward");
  });
}

absl::Status Cast(const KernelContext& ctx, void* out, DType out_dtype, const void* in, DType in_dtype, int64_t n) {
  if (out_dtype == in_dtype) {
    if (out == in) return absl::OkStatus();
    return CudaStatus("Cast (copy)", cudaMemcpyAsync(out, in, static_cast<size_t>(n) * DTypeSize(in_dtype),
                                                     cudaMemcpyDeviceToDevice, StreamOf(ctx)));
  }
  return DispatchFloatDType(in_dtype, "Cast", [&](auto in_tag) {
    using In = decltype(in_tag);
    return DispatchFloatDType(out_dtype, "Cast", [&](auto out_tag) {
      using Out = decltype(out_tag);
      CastKernel<In, Out><<<GridFor(n), kThreads, 0, StreamOf(ctx)>>>(static_cast<Out*>(out),
                                                                       static_cast<const In*>(in), n);
      return CheckLaunch("Cast");
    });
  });
}

absl::Status AccumulateInto(const KernelContext& ctx, float* dst, const void* src, DType src_dtype, int64_t n) {
  return DispatchFloatDType(src_dtype, "AccumulateInto", [&](auto tag) {
    using T = decltype(tag);
    AccumulateKernel<T><<<GridFor(n), kThreads, 0, StreamOf(ctx)>>>(dst, static_cast<const T*>(src), n);
    return CheckLaunch("AccumulateInto");
  });
}

absl::Status ScaleInPlace(const KernelContext& ctx, void* x, int64_t n, DType dtype, float scale,
                          bool* found_nonfinite) {
  if (found_nonfinite == nullptr) {  // no check: stream-ordered, no wait
    return DispatchFloatDType(dtype, "ScaleInPlace", [&](auto tag) {
      using T = decltype(tag);
      ScaleKernel<T><<<GridFor(n), kThreads, 0, StreamOf(ctx)>>>(static_cast<T*>(x), n, scale, nullptr);
      return CheckLaunch("ScaleInPlace");
    });
  }
  absl::Status ws = RequireWorkspace("ScaleInPlace", ctx);
  if (!ws.ok()) return ws;
  int* flag = static_cast<int*>(ctx.cuda_workspace);
  cudaStream_t stream = StreamOf(ctx);
  if (absl::Status s = CudaStatus("ScaleInPlace (clear flag)", cudaMemsetAsync(flag, 0, sizeof(int), stream));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = DispatchFloatDType(dtype, "ScaleInPlace",
                                          [&](auto tag) {
                                            using T = decltype(tag);
                                            ScaleKernel<T><<<GridFor(n), kThreads, 0, stream>>>(
                                                static_cast<T*>(x), n, scale, flag);
                                            return CheckLaunch("ScaleInPlace");
                                          });
      !s.ok()) {
    return s;
  }
  int host_flag = 0;
  if (absl::Status s = CudaStatus("ScaleInPlace (read flag)", cudaMemcpyAsync(&host_flag, flag, sizeof(int),
                                                                              cudaMemcpyDeviceToHost, stream));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CudaStatus("ScaleInPlace (sync)", cudaStreamSynchronize(stream)); !s.ok()) return s;
  *found_nonfinite = host_flag != 0;
  return absl::OkStatus();
}

namespace {

// The partials of each span reuse one region (stream order keeps them
// apart); the totals gather after it and come back in one copy per
// workspace-full of spans. `name` labels errors.
absl::Status SumOfSquaresOfSpans(const KernelContext& ctx, const void* const* xs, const int64_t* ns,
                                 size_t count_all, DType dtype, double* results, const char* name) {
  absl::Status ws = RequireWorkspace(name, ctx);
  if (!ws.ok()) return ws;
  double* partial = static_cast<double*>(ctx.cuda_workspace);
  double* totals = partial + kSumBlocks;
  const size_t capacity = ctx.cuda_workspace_bytes / sizeof(double) - kSumBlocks;
  cudaStream_t stream = StreamOf(ctx);
  // "<name> (<stage>): <CUDA's error>", built only on failure.
  const auto at = [name](const char* stage, cudaError_t err) {
    return err == cudaSuccess ? absl::OkStatus() : CudaStatus(absl::StrCat(name, " (", stage, ")").c_str(), err);
  };
  for (size_t first = 0; first < count_all; first += capacity) {
    const size_t count = std::min(capacity, count_all - first);
    for (size_t i = 0; i < count; ++i) {
      const void* x = xs[first + i];
      const int64_t n = ns[first + i];
      absl::Status s = DispatchFloatDType(dtype, name, [&](auto tag) {
        using T = decltype(tag);
        SumSquaresPartialKernel<T><<<kSumBlocks, kThreads, 0, stream>>>(static_cast<const T*>(x), n, partial);
        return at("partials", cudaGetLastError());
      });
      if (!s.ok()) return s;
      SumPartialsKernel<<<1, 1, 0, stream>>>(partial, kSumBlocks, totals + i);
      if (absl::Status total = at("total", cudaGetLastError()); !total.ok()) return total;
    }
    if (absl::Status s = at("read", cudaMemcpyAsync(results + first, totals, count * sizeof(double),
                                                    cudaMemcpyDeviceToHost, stream));
        !s.ok()) {
      return s;
    }
    if (absl::Status s = at("sync", cudaStreamSynchronize(stream)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SumOfSquares(const KernelContext& ctx, const void* x, int64_t n, DType dtype, double* result) {
  return SumOfSquaresOfSpans(ctx, &x, &n, 1, dtype, result, "SumOfSquares");
}

absl::Status SumOfSquaresMany(const KernelContext& ctx, const void* const* xs, const int64_t* ns, size_t count,
                              DType dtype, double* results) {
  return SumOfSquaresOfSpans(ctx, xs, ns, count, dtype, results, "SumOfSquaresMany");
}

}  // namespace zeroshard::kernels::cuda
