// Embedding forward (one thread per output element) and a deterministic
// backward: one thread per channel walks the positions in (b,t) order, so
// every dwte/dwpe element adds its contributions in that order. Simple and
// repeatable, not fast (C threads in flight); see kernels/embedding.h.
#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/launchers.h"
#include "kernels/float_types.h"

namespace zeroshard::kernels::cuda {
namespace {

template <typename T>
__global__ void EmbeddingForwardKernel(T* out, const int32_t* tokens, const T* wte, const T* wpe, int64_t rows,
                                       int64_t seq_len, int64_t c) {
  const int64_t n = rows * c;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / c, j = i % c;
    out[i] = Store<T>(Load(wte[static_cast<int64_t>(tokens[r]) * c + j]) + Load(wpe[(r % seq_len) * c + j]));
  }
}

template <typename T>
__global__ void EmbeddingBackwardWteKernel(T* dwte, const T* dout, const int32_t* tokens, int64_t rows, int64_t c) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (j >= c) return;
  for (int64_t r = 0; r < rows; ++r) {
    T* p = dwte + static_cast<int64_t>(tokens[r]) * c + j;
    *p = Store<T>(Load(*p) + Load(dout[r * c + j]));
  }
}

template <typename T>
__global__ void EmbeddingBackwardWpeKernel(T* dwpe, const T* dout, int64_t batch, int64_t seq_len, int64_t c) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= seq_len * c) return;
  const int64_t t = i / c, j = i % c;
  float acc = 0.0f;
  for (int64_t b = 0; b < batch; ++b) acc += Load(dout[(b * seq_len + t) * c + j]);
  dwpe[i] = Store<T>(Load(dwpe[i]) + acc);
}

}  // namespace

absl::Status EmbeddingForward(const KernelContext& ctx, void* out, const int32_t* tokens, const void* wte,
                              const void* wpe, int64_t batch, int64_t seq_len, int64_t channels, DType dtype) {
  return DispatchFloatDType(dtype, "EmbeddingForward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t rows = batch * seq_len;
    EmbeddingForwardKernel<T><<<GridFor(rows * channels), kThreads, 0, StreamOf(ctx)>>>(
        static_cast<T*>(out), tokens, static_cast<const T*>(wte), static_cast<const T*>(wpe), rows, seq_len,
        channels);
    return CheckLaunch("EmbeddingForward");
  });
}

absl::Status EmbeddingBackward(const KernelContext& ctx, void* dwte, void* dwpe, const void* dout,
                               const int32_t* tokens, int64_t batch, int64_t seq_len, int64_t channels,
                               int64_t vocab, DType dtype) {
  return DispatchFloatDType(dtype, "EmbeddingBackward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t rows = batch * seq_len;
    unsigned grid = static_cast<unsigned>((channels + kThreads - 1) / kThreads);
    EmbeddingBackwardWteKernel<T><<<grid, kThreads, 0, StreamOf(ctx)>>>(
        static_cast<T*>(dwte), static_cast<const T*>(dout), tokens, rows, channels);
    absl::Status s = CheckLaunch("EmbeddingBackward (wte)");
    if (!s.ok() || dwpe == nullptr) return s;
    unsigned grid_pe = static_cast<unsigned>((seq_len * channels + kThreads - 1) / kThreads);
    EmbeddingBackwardWpeKernel<T><<<grid_pe, kThreads, 0, StreamOf(ctx)>>>(
        static_cast<T*>(dwpe), static_cast<const T*>(dout), batch, seq_len, channels);
    return CheckLaunch("EmbeddingBackward (wpe)");
  });
}

}  // namespace zeroshard::kernels::cuda
