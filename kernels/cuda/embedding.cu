// Embedding forward (one thread per output element) and a deterministic
// backward. dwte: the (token, position) pairs are sorted by token with a
// stable radix sort (so each token's positions stay in (b,t) order), then one
// block per run of equal tokens sums the run's dout rows in that order in f32,
// threads striding over channels, and adds the sum into dwte once: no
// atomics, the same bits on every run, and the CPU's order and rounding.
// dwpe: one thread per element walks the batch in order. The sort's scratch
// comes from the stream-ordered allocator on ctx's stream (nothing waits).
#include <cub/cub.cuh>

#include <climits>

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

__global__ void IotaKernel(int32_t* out, int n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = static_cast<int32_t>(i);
  }
}

// Block b handles the run of equal tokens that starts at sorted index b;
// every other block exits. positions[k] ascends within a run (stable sort).
template <typename T>
__global__ void EmbeddingBackwardWteRunsKernel(T* dwte, const T* dout, const uint32_t* sorted_tokens,
                                               const int32_t* positions, int n, int64_t c) {
  const int start = blockIdx.x;
  const uint32_t token = sorted_tokens[start];
  if (start > 0 && sorted_tokens[start - 1] == token) return;
  // The run ends at the first larger token (binary search; all threads alike).
  int lo = start + 1, hi = n;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (sorted_tokens[mid] <= token) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  const int end = lo;
  T* row = dwte + static_cast<int64_t>(token) * c;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    float acc = 0.0f;
#pragma unroll 4
    for (int k = start; k < end; ++k) acc += Load(dout[static_cast<int64_t>(positions[k]) * c + j]);
    row[j] = Store<T>(Load(row[j]) + acc);
  }
}

// A failed runtime call also leaves its error to cudaGetLastError; clear it
// so a later CheckLaunch does not report it again.
absl::Status CudaCall(const char* what, cudaError_t err) {
  if (err != cudaSuccess) (void)cudaGetLastError();
  return CudaStatus(what, err);
}

size_t AlignUp(size_t bytes) { return (bytes + 255) / 256 * 256; }

// Tokens are in [0, vocab): only their low bits need sorting.
int SortBits(int64_t vocab) {
  int bits = 1;
  while (bits < 32 && (uint64_t{1} << bits) < static_cast<uint64_t>(vocab)) ++bits;
  return bits;
}

// Scratch of EmbeddingBackwardWte: sorted tokens, positions in and sorted,
// then CUB's temporary storage.
struct WteScratch {
  uint32_t* sorted_tokens;
  int32_t* positions_in;
  int32_t* positions;
  void* sort_temp;
  size_t sort_bytes;
};

template <typename T>
absl::Status SortAndSumRuns(cudaStream_t stream, const WteScratch& w, T* dwte, const T* dout, const uint32_t* tokens,
                            int n, int64_t channels, int end_bit) {
  IotaKernel<<<GridFor(n), kThreads, 0, stream>>>(w.positions_in, n);
  const absl::Status iota = CheckLaunch("EmbeddingBackward (positions)");
  if (!iota.ok()) return iota;
  size_t sort_bytes = w.sort_bytes;
  const absl::Status sorted = CudaCall(
      "EmbeddingBackward (sort)", cub::DeviceRadixSort::SortPairs(w.sort_temp, sort_bytes, tokens, w.sorted_tokens,
                                                                  w.positions_in, w.positions, n, 0, end_bit, stream));
  if (!sorted.ok()) return sorted;
  const int threads = static_cast<int>(std::min<int64_t>(kThreads, (channels + 31) / 32 * 32));
  EmbeddingBackwardWteRunsKernel<T><<<static_cast<unsigned>(n), threads, 0, stream>>>(dwte, dout, w.sorted_tokens,
                                                                                    w.positions, n, channels);
  return CheckLaunch("EmbeddingBackward (wte)");
}

// dwte += the per-token sums; scratch from the stream-ordered allocator.
template <typename T>
absl::Status EmbeddingBackwardWte(cudaStream_t stream, T* dwte, const T* dout, const int32_t* tokens, int n,
                                  int64_t channels, int64_t vocab) {
  const int end_bit = SortBits(vocab);
  const auto* keys = reinterpret_cast<const uint32_t*>(tokens);
  size_t sort_bytes = 0;
  const absl::Status sized = CudaCall(
      "EmbeddingBackward (sort size)",
      cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, keys, static_cast<uint32_t*>(nullptr),
                                      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), n, 0,
                                      end_bit, stream));
  if (!sized.ok()) return sized;
  const size_t ints = AlignUp(sizeof(int32_t) * static_cast<size_t>(n));
  char* scratch = nullptr;
  const absl::Status allocated =
      CudaCall("EmbeddingBackward (cudaMallocAsync)",
               cudaMallocAsync(reinterpret_cast<void**>(&scratch), 3 * ints + sort_bytes, stream));
  if (!allocated.ok()) return allocated;
  const WteScratch w{reinterpret_cast<uint32_t*>(scratch), reinterpret_cast<int32_t*>(scratch + ints),
                     reinterpret_cast<int32_t*>(scratch + 2 * ints), scratch + 3 * ints, sort_bytes};
  const absl::Status ran = SortAndSumRuns(stream, w, dwte, dout, keys, n, channels, end_bit);
  // Freed in stream order after the kernels, whether or not they all launched.
  const absl::Status freed = CudaCall("EmbeddingBackward (cudaFreeAsync)", cudaFreeAsync(scratch, stream));
  return ran.ok() ? freed : ran;
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
    if (rows > INT_MAX) {
      return absl::InvalidArgumentError(
          absl::StrCat("EmbeddingBackward: batch * seq_len = ", rows, ", expected <= ", INT_MAX, " on CUDA"));
    }
    absl::Status s = EmbeddingBackwardWte(StreamOf(ctx), static_cast<T*>(dwte), static_cast<const T*>(dout), tokens,
                                          static_cast<int>(rows), channels, vocab);
    if (!s.ok() || dwpe == nullptr) return s;
    unsigned grid_pe = static_cast<unsigned>((seq_len * channels + kThreads - 1) / kThreads);
    EmbeddingBackwardWpeKernel<T><<<grid_pe, kThreads, 0, StreamOf(ctx)>>>(
        static_cast<T*>(dwpe), static_cast<const T*>(dout), batch, seq_len, channels);
    return CheckLaunch("EmbeddingBackward (wpe)");
  });
}

}  // namespace zeroshard::kernels::cuda
