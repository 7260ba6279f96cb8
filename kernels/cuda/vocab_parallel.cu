// Vocabulary-parallel embedding and cross-entropy pieces (kernels/vocab_parallel.h).
// Embedding: one thread per output element forward; backward one thread per
// channel walking the positions in (b,t) order (deterministic, as
// embedding.cu). Cross-entropy: one block per row for the row reductions
// (fixed-shape block reductions), one thread per logit for the gradient, the
// loss sum by a single block in a fixed order (f64).
#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/vocab_parallel_launchers.h"
#include "kernels/float_types.h"
#include "kernels/pointwise_math.h"

namespace zeroshard::kernels::cuda {
namespace {

__device__ inline bool InRange(int64_t token, int64_t begin, int64_t valid) {
  return token >= begin && token < begin + valid;
}

template <typename T>
__global__ void EmbeddingForwardRangeKernel(T* out, const int32_t* tokens, const T* wte, const T* wpe, int64_t rows,
                                            int64_t seq_len, int64_t c, int64_t begin, int64_t valid) {
  const int64_t n = rows * c;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / c, j = i % c;
    const int64_t token = tokens[r];
    out[i] = InRange(token, begin, valid)
                 ? Store<T>(Load(wte[(token - begin) * c + j]) + Load(wpe[(r % seq_len) * c + j]))
                 : Store<T>(0.0f);
  }
}

template <typename T>
__global__ void EmbeddingBackwardRangeWteKernel(T* dwte, const T* dout, const int32_t* tokens, int64_t rows,
                                                int64_t c, int64_t begin, int64_t valid) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (j >= c) return;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t token = tokens[r];
    if (!InRange(token, begin, valid)) continue;
    T* p = dwte + (token - begin) * c + j;
    *p = Store<T>(Load(*p) + Load(dout[r * c + j]));
  }
}

template <typename T>
__global__ void EmbeddingBackwardRangeWpeKernel(T* dwpe, const T* dout, int64_t batch, int64_t seq_len, int64_t c) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= seq_len * c) return;
  const int64_t t = i / c, j = i % c;
  float acc = 0.0f;
  for (int64_t b = 0; b < batch; ++b) acc += Load(dout[(b * seq_len + t) * c + j]);
  dwpe[i] = Store<T>(Load(dwpe[i]) + acc);
}

template <typename T>
__global__ void RowMaxKernel(float* row_max, const T* logits, int64_t local, int64_t valid) {
  __shared__ float shared[32];
  const int64_t r = blockIdx.x;
  const T* z = logits + r * local;
  float mx = -INFINITY;
  for (int64_t v = threadIdx.x; v < valid; v += blockDim.x) mx = fmaxf(mx, Load(z[v]));
  mx = BlockMax(mx, shared);
  if (threadIdx.x == 0) row_max[r] = mx;
}

template <typename T>
__global__ void SumExpAndTargetKernel(float* sums, const T* logits, const float* row_max, const int32_t* targets,
                                      int64_t rows, int64_t begin, int64_t local, int64_t valid) {
  __shared__ double shared[32];
  const int64_t r = blockIdx.x;
  const T* z = logits + r * local;
  const float mx = row_max[r];
  double sum = 0.0;
  for (int64_t v = threadIdx.x; v < valid; v += blockDim.x) sum += expf(Load(z[v]) - mx);
  sum = BlockSum(sum, shared);
  if (threadIdx.x == 0) {
    sums[r] = static_cast<float>(sum);
    const int64_t target = targets[r];
    sums[rows + r] = InRange(target, begin, valid) ? Load(z[target - begin]) : 0.0f;
  }
}

__global__ void LossKernel(float* losses, float* lse, const float* row_max, const float* sums, const int32_t* targets,
                           int64_t rows) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows; r += int64_t{gridDim.x} * blockDim.x) {
    const float row_lse = row_max[r] + static_cast<float>(log(static_cast<double>(sums[r])));
    lse[r] = row_lse;
    losses[r] = targets[r] < 0 ? 0.0f : row_lse - sums[rows + r];
  }
}

template <typename T>
__global__ void CrossEntropyBackwardRangeKernel(T* dlogits, const T* logits, const float* lse, const int32_t* targets,
                                                float dloss, int64_t rows, int64_t begin, int64_t local,
                                                int64_t valid) {
  const int64_t n = rows * local;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / local, v = i % local;
    const int64_t target = targets[r];
    dlogits[i] = Store<T>(target < 0 || v >= valid
                              ? 0.0f
                              : CrossEntropyLogitGrad(Load(logits[i]), lse[r], v == target - begin, dloss));
  }
}

}  // namespace

absl::Status EmbeddingForwardVocabRange(const KernelContext& ctx, void* out, const int32_t* tokens,
                                        const void* wte_local, const void* wpe, int64_t batch, int64_t seq_len,
                                        int64_t channels, int64_t begin, int64_t /*local*/, int64_t valid,
                                        DType dtype) {
  return DispatchFloatDType(dtype, "EmbeddingForwardVocabRange", [&](auto tag) {
    using T = decltype(tag);
    const int64_t rows = batch * seq_len;
    EmbeddingForwardRangeKernel<T><<<GridFor(rows * channels), kThreads, 0, StreamOf(ctx)>>>(
        static_cast<T*>(out), tokens, static_cast<const T*>(wte_local), static_cast<const T*>(wpe), rows, seq_len,
        channels, begin, valid);
    return CheckLaunch("EmbeddingForwardVocabRange");
  });
}

absl::Status EmbeddingBackwardVocabRange(const KernelContext& ctx, void* dwte_local, void* dwpe, const void* dout,
                                         const int32_t* tokens, int64_t batch, int64_t seq_len, int64_t channels,
                                         int64_t begin, int64_t /*local*/, int64_t valid, DType dtype) {
  return DispatchFloatDType(dtype, "EmbeddingBackwardVocabRange", [&](auto tag) {
    using T = decltype(tag);
    const int64_t rows = batch * seq_len;
    const unsigned grid = static_cast<unsigned>((channels + kThreads - 1) / kThreads);
    EmbeddingBackwardRangeWteKernel<T><<<grid, kThreads, 0, StreamOf(ctx)>>>(
        static_cast<T*>(dwte_local), static_cast<const T*>(dout), tokens, rows, channels, begin, valid);
    absl::Status s = CheckLaunch("EmbeddingBackwardVocabRange (wte)");
    if (!s.ok() || dwpe == nullptr) return s;
    const unsigned grid_pe = static_cast<unsigned>((seq_len * channels + kThreads - 1) / kThreads);
    EmbeddingBackwardRangeWpeKernel<T><<<grid_pe, kThreads, 0, StreamOf(ctx)>>>(
        static_cast<T*>(dwpe), static_cast<const T*>(dout), batch, seq_len, channels);
    return CheckLaunch("EmbeddingBackwardVocabRange (wpe)");
  });
}

absl::Status VocabParallelRowMax(const KernelContext& ctx, float* row_max, const void* logits_local, int64_t rows,
                                 int64_t local, int64_t valid, DType dtype) {
  return DispatchFloatDType(dtype, "VocabParallelRowMax", [&](auto tag) {
    using T = decltype(tag);
    RowMaxKernel<T><<<static_cast<unsigned>(rows), kThreads, 0, StreamOf(ctx)>>>(
        row_max, static_cast<const T*>(logits_local), local, valid);
    return CheckLaunch("VocabParallelRowMax");
  });
}

absl::Status VocabParallelSumExpAndTarget(const KernelContext& ctx, float* sums, const void* logits_local,
                                          const float* row_max, const int32_t* targets, int64_t rows, int64_t begin,
                                          int64_t local, int64_t valid, DType dtype) {
  return DispatchFloatDType(dtype, "VocabParallelSumExpAndTarget", [&](auto tag) {
    using T = decltype(tag);
    SumExpAndTargetKernel<T><<<static_cast<unsigned>(rows), kThreads, 0, StreamOf(ctx)>>>(
        sums, static_cast<const T*>(logits_local), row_max, targets, rows, begin, local, valid);
    return CheckLaunch("VocabParallelSumExpAndTarget");
  });
}

absl::Status VocabParallelLoss(const KernelContext& ctx, float* losses, float* lse, float* loss_sums,
                               const float* row_max, const float* sums, const int32_t* targets, int64_t rows) {
  cudaStream_t stream = StreamOf(ctx);
  LossKernel<<<GridFor(rows), kThreads, 0, stream>>>(losses, lse, row_max, sums, targets, rows);
  absl::Status s = CheckLaunch("VocabParallelLoss");
  if (!s.ok() || loss_sums == nullptr) return s;
  return LossSums(ctx, loss_sums, losses, targets, rows, "VocabParallelLoss (loss sums)");
}

absl::Status VocabParallelCrossEntropyBackward(const KernelContext& ctx, void* dlogits_local,
                                               const void* logits_local, const float* lse, const int32_t* targets,
                                               float dloss, int64_t rows, int64_t begin, int64_t local,
                                               int64_t valid, DType dtype) {
  return DispatchFloatDType(dtype, "VocabParallelCrossEntropyBackward", [&](auto tag) {
    using T = decltype(tag);
    CrossEntropyBackwardRangeKernel<T><<<GridFor(rows * local), kThreads, 0, StreamOf(ctx)>>>(
        static_cast<T*>(dlogits_local), static_cast<const T*>(logits_local), lse, targets, dloss, rows, begin,
        local, valid);
    return CheckLaunch("VocabParallelCrossEntropyBackward");
  });
}

}  // namespace zeroshard::kernels::cuda
