// Host-side wait for queued device work.
//
// The CUDA kernels run on ctx.cuda_stream (a non-blocking stream), while
// core's DeviceCopy/DeviceMemset use the legacy stream, which does not order
// itself against non-blocking streams. Code that mixes them (reading a loss a
// kernel wrote, memsetting gradients kernels will accumulate into) waits here.
// TODO(kernels): replace with a kernels/ synchronize on the context's stream
// once kernels/context.h exposes one.
#ifndef ZEROSHARD_NN_DEVICE_SYNC_H_
#define ZEROSHARD_NN_DEVICE_SYNC_H_

#include "absl/status/status.h"
#include "kernels/context.h"

namespace zeroshard {

// CPU: returns OK at once. CUDA: blocks until every stream of the current
// device is idle (cudaDeviceSynchronize); kInternal naming a failed kernel.
absl::Status WaitForDevice(const kernels::KernelContext& ctx);

}  // namespace zeroshard

#endif  // ZEROSHARD_NN_DEVICE_SYNC_H_
