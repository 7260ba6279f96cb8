#include "nn/device_sync.h"

#include "absl/strings/str_cat.h"

#ifdef ZEROSHARD_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace zeroshard {

absl::Status WaitForDevice(const kernels::KernelContext& ctx) {
  if (ctx.device == Device::kCpu) return absl::OkStatus();
#ifdef ZEROSHARD_HAS_CUDA
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    return absl::InternalError(absl::StrCat("device work failed: ", cudaGetErrorString(err)));
  }
  return absl::OkStatus();
#else
  return absl::UnavailableError("WaitForDevice: built without CUDA");
#endif
}

}  // namespace zeroshard
