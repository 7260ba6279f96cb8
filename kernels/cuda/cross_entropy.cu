// Fused softmax cross-entropy: one block per row for the forward, one thread
// per logit for the backward; the loss sum and valid-row count by a single
// block in a fixed order (f64). A negative target is an ignored row.
//
// The forward reads each logit once: every thread keeps a running (max, sum
// of exp(z - max)) over chunks of its strided logits, the sum in f64 and
// rescaled in f64 when the max grows; the block then combines the pairs (in
// f64, fixed shape, so run-to-run identical). Each term is still an f32
// expf summed in f64, as on the CPU; its argument z - m (m <= the row max)
// rounds no worse than z - row max, and the rescalings are f64.
#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/launchers.h"
#include "kernels/float_types.h"
#include "kernels/pointwise_math.h"

namespace zeroshard::kernels::cuda {
namespace {

// Strided logits each thread holds at once: kThreads * kChunk per block step.
constexpr int kChunk = 8;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    CrossEntropyForwardKernel(float* losses, float* lse, const T* logits, const int32_t* targets, int64_t vocab) {
  __shared__ float shared_f[32];
  __shared__ double shared_d[32];
  const int64_t r = blockIdx.x;
  const T* z = logits + r * vocab;
  float mx = -INFINITY;  // max so far of this thread's logits
  double sum = 0.0;      // sum so far of exp(z - mx)
  for (int64_t base = threadIdx.x; base < vocab; base += int64_t{kThreads} * kChunk) {
    float v[kChunk];
    float chunk_mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < kChunk; ++k) {
      const int64_t i = base + int64_t{kThreads} * k;
      v[k] = i < vocab ? Load(z[i]) : -INFINITY;
      chunk_mx = fmaxf(chunk_mx, v[k]);
    }
    const float new_mx = fmaxf(mx, chunk_mx);
    if (new_mx == -INFINITY) {
      // Only -inf (or NaN) so far: -inf adds nothing; NaN must still reach lse.
#pragma unroll
      for (int k = 0; k < kChunk; ++k) {
        if (v[k] != v[k]) sum += v[k];
      }
      continue;
    }
    if (new_mx > mx && sum != 0.0) sum *= exp(static_cast<double>(mx) - static_cast<double>(new_mx));
    mx = new_mx;
#pragma unroll
    for (int k = 0; k < kChunk; ++k) sum += expf(v[k] - mx);  // padding is -inf: adds 0
  }
  // Combine the (max, sum) pairs: rescale every sum to the row max.
  const float row_mx = BlockMax(mx, shared_f);
  const double scaled = mx == -INFINITY ? sum : sum * exp(static_cast<double>(mx) - static_cast<double>(row_mx));
  const double row_sum = BlockSum(scaled, shared_d);
  if (threadIdx.x == 0) {
    const float row_lse = row_mx + static_cast<float>(log(row_sum));
    lse[r] = row_lse;
    const int32_t target = targets[r];
    losses[r] = target < 0 ? 0.0f : row_lse - Load(z[target]);
  }
}

// sums[0] = sum of the valid rows' losses, sums[1] = their count.
__global__ void LossSumsKernel(const float* losses, const int32_t* targets, int64_t rows, float* sums) {
  __shared__ double shared[32];
  __shared__ long long shared_count[32];
  double acc = 0.0;
  long long count = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    if (targets[r] < 0) continue;
    acc += losses[r];
    ++count;
  }
  acc = BlockSum(acc, shared);
  count = BlockSum(count, shared_count);
  if (threadIdx.x == 0) {
    sums[0] = static_cast<float>(acc);
    sums[1] = static_cast<float>(count);
  }
}

template <typename T>
__global__ void CrossEntropyBackwardKernel(T* dlogits, const T* logits, const float* lse, const int32_t* targets,
                                           float dloss, int64_t rows, int64_t vocab) {
  const int64_t n = rows * vocab;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / vocab, v = i % vocab;
    const int32_t target = targets[r];
    dlogits[i] = Store<T>(target < 0 ? 0.0f : CrossEntropyLogitGrad(Load(logits[i]), lse[r], v == target, dloss));
  }
}

}  // namespace

absl::Status CrossEntropyForward(const KernelContext& ctx, float* losses, float* lse, float* loss_sums,
                                 const void* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                                 DType dtype) {
  cudaStream_t stream = StreamOf(ctx);
  absl::Status s = DispatchFloatDType(dtype, "CrossEntropyForward", [&](auto tag) {
    using T = decltype(tag);
    CrossEntropyForwardKernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
        losses, lse, static_cast<const T*>(logits), targets, vocab);
    return CheckLaunch("CrossEntropyForward");
  });
  if (!s.ok() || loss_sums == nullptr) return s;
  return LossSums(ctx, loss_sums, losses, targets, rows, "CrossEntropyForward (loss sums)");
}

absl::Status LossSums(const KernelContext& ctx, float* sums, const float* losses, const int32_t* targets,
                      int64_t rows, const char* what) {
  LossSumsKernel<<<1, 1024, 0, StreamOf(ctx)>>>(losses, targets, rows, sums);
  return CheckLaunch(what);
}

absl::Status CrossEntropyBackward(const KernelContext& ctx, void* dlogits, const void* logits, const float* lse,
                                  const int32_t* targets, float dloss, int64_t rows, int64_t vocab, DType dtype) {
  return DispatchFloatDType(dtype, "CrossEntropyBackward", [&](auto tag) {
    using T = decltype(tag);
    CrossEntropyBackwardKernel<T><<<GridFor(rows * vocab), kThreads, 0, StreamOf(ctx)>>>(
        static_cast<T*>(dlogits), static_cast<const T*>(logits), lse, targets, dloss, rows, vocab);
    return CheckLaunch("CrossEntropyBackward");
  });
}

}  // namespace zeroshard::kernels::cuda
