// Owns what a CUDA KernelContext points to: a stream (blocking: it orders
// with the legacy default stream that DeviceCopy uses), a cuBLAS handle, a
// cuBLASLt handle and a workspace of kMinCudaWorkspaceBytes on the current
// device. The cuBLASLt handle is its own object (a cublasHandle_t is not
// documented to work as one) and lives here rather than in a process-wide
// static because it belongs to the device current at creation, as the
// cuBLAS handle does.
//
// Only defined when the build has CUDA (ZEROSHARD_HAS_CUDA); callers guard
// their use with that macro. Not thread-safe: one owner per stream.
#ifndef ZEROSHARD_KERNELS_CUDA_CUDA_RESOURCES_H_
#define ZEROSHARD_KERNELS_CUDA_CUDA_RESOURCES_H_

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/context.h"

namespace zeroshard::kernels::cuda {

class CudaResources {
 public:
  // kUnavailable when no usable GPU exists; kInternal on a CUDA/cuBLAS failure.
  static absl::StatusOr<std::unique_ptr<CudaResources>> Create();
  ~CudaResources();
  CudaResources(const CudaResources&) = delete;
  CudaResources& operator=(const CudaResources&) = delete;

  // A context on this stream; valid while *this lives.
  KernelContext context() const;
  // Blocks until the stream's work is done; kInternal names a failed kernel.
  absl::Status Synchronize() const;

 private:
  CudaResources() = default;
  void* stream_ = nullptr;
  void* cublas_ = nullptr;
  void* cublaslt_ = nullptr;
  void* workspace_ = nullptr;
};

}  // namespace zeroshard::kernels::cuda

#endif  // ZEROSHARD_KERNELS_CUDA_CUDA_RESOURCES_H_
