#include "nn/device_sync.h"

#include "absl/strings/str_cat.h"

#ifdef ZEROSHARD_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace zeroshard {

absl::Status WaitForDevice(const kernels::KernelContext& ctx) {
  if (ctx.device == Device::kCpu) return absl::OkStatus();
#ifdef ZEROSHARD_HAS_CUDA
  // The context's stream only, never the whole device: other streams
  // (communication) keep running.
  const cudaError_t err = cudaStreamSynchronize(static_cast<cudaStream_t>(ctx.cuda_stream));
  if (err != cudaSuccess) {
    return absl::InternalError(absl::StrCat("device work failed: ", cudaGetErrorString(err)));
  }
  return absl::OkStatus();
#else
  return absl::UnavailableError("WaitForDevice: built without CUDA");
#endif
}

}  // namespace zeroshard
