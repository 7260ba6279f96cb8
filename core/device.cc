#include "core/device.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

#ifdef ZEROSHARD_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace zeroshard {

const char* DeviceName(Device device) { return device == Device::kCpu ? "cpu" : "cuda"; }

bool CudaAvailable(std::string* reason) {
#ifdef ZEROSHARD_HAS_CUDA
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (reason) *reason = absl::StrCat("no usable GPU: ", cudaGetErrorString(err));
    cudaGetLastError();  // Clear the sticky error for later calls.
    return false;
  }
  if (count == 0) {
    if (reason) *reason = "no GPU: cudaGetDeviceCount returned 0";
    return false;
  }
  return true;
#else
  if (reason) *reason = "built without CUDA (--//bazel:cuda=false or no nvcc)";
  return false;
#endif
}

absl::StatusOr<void*> DeviceAlloc(Device device, size_t bytes) {
  if (bytes == 0) return nullptr;
  if (device == Device::kCpu) {
    size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("host allocation of ", bytes, " bytes failed"));
    }
    return p;
  }
#ifdef ZEROSHARD_HAS_CUDA
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return absl::ResourceExhaustedError(
        absl::StrCat("cudaMalloc of ", bytes, " bytes failed: ", cudaGetErrorString(err)));
  }
  return p;
#else
  return absl::UnavailableError("cuda allocation requested but zeroshard was built without CUDA");
#endif
}

void DeviceFree(Device device, void* ptr) {
  if (ptr == nullptr) return;
  if (device == Device::kCpu) {
    std::free(ptr);
    return;
  }
#ifdef ZEROSHARD_HAS_CUDA
  cudaFree(ptr);
#endif
}

absl::Status DeviceCopy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (dst_device == Device::kCpu && src_device == Device::kCpu) {
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
#ifdef ZEROSHARD_HAS_CUDA
  cudaError_t err = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
  if (err != cudaSuccess) {
    return absl::InternalError(absl::StrCat("cudaMemcpy of ", bytes, " bytes failed: ", cudaGetErrorString(err)));
  }
  return absl::OkStatus();
#else
  return absl::UnavailableError("cuda copy requested but zeroshard was built without CUDA");
#endif
}

absl::Status DeviceMemset(void* dst, Device device, int value, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (device == Device::kCpu) {
    std::memset(dst, value, bytes);
    return absl::OkStatus();
  }
#ifdef ZEROSHARD_HAS_CUDA
  cudaError_t err = cudaMemset(dst, value, bytes);
  if (err != cudaSuccess) {
    return absl::InternalError(absl::StrCat("cudaMemset of ", bytes, " bytes failed: ", cudaGetErrorString(err)));
  }
  return absl::OkStatus();
#else
  return absl::UnavailableError("cuda memset requested but zeroshard was built without CUDA");
#endif
}

}  // namespace zeroshard
