// Helpers shared by the .cu files: stream access, launch checks, grid sizes,
// and fixed-shape (hence deterministic) warp and block reductions.
#ifndef ZEROSHARD_KERNELS_CUDA_CUDA_UTIL_CUH_
#define ZEROSHARD_KERNELS_CUDA_CUDA_UTIL_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/context.h"

namespace zeroshard::kernels::cuda {

inline cudaStream_t StreamOf(const KernelContext& ctx) { return static_cast<cudaStream_t>(ctx.cuda_stream); }

inline absl::Status CudaStatus(const char* what, cudaError_t err) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorName(err), ": ", cudaGetErrorString(err)));
}

// After a launch: reports bad configurations and earlier asynchronous errors.
inline absl::Status CheckLaunch(const char* kernel) { return CudaStatus(kernel, cudaGetLastError()); }

inline absl::Status RequireWorkspace(const char* kernel, const KernelContext& ctx) {
  if (ctx.cuda_workspace == nullptr || ctx.cuda_workspace_bytes < kMinCudaWorkspaceBytes) {
    return absl::FailedPreconditionError(absl::StrCat(kernel, ": ctx.cuda_workspace has ", ctx.cuda_workspace_bytes,
                                                      " bytes, expected >= ", kMinCudaWorkspaceBytes));
  }
  return absl::OkStatus();
}

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n items (capped; the loop covers the rest).
inline unsigned GridFor(int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(blocks, 65535LL * 8)));
}

template <typename T>
__device__ inline T WarpSum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ inline float WarpMax(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over a block of blockDim.x (a multiple of 32, <= 1024) threads; every
// thread gets the result. `shared` holds 32 values.
template <typename T>
__device__ inline T BlockSum(T v, T* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = WarpSum(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  T total = lane < warps ? shared[lane] : T(0);
  total = WarpSum(total);
  return total;
}

__device__ inline float BlockMax(float v, float* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = WarpMax(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float m = lane < warps ? shared[lane] : -INFINITY;
  return WarpMax(m);
}

}  // namespace zeroshard::kernels::cuda

#endif  // ZEROSHARD_KERNELS_CUDA_CUDA_UTIL_CUH_
