// Host-side wait for the kernels queued on a context's stream.
//
// The CUDA kernels run on ctx.cuda_stream, which kernels/cuda/cuda_resources.h
// creates *blocking*: it orders with the legacy default stream that core's
// DeviceCopy/DeviceMemset use, so a memset before a kernel, or a copy of a
// kernel's result, is ordered without a wait. Waiting is for the host: code
// that reads back what a kernel wrote (a loss, a flag) before using it on
// the host calls WaitForDevice first.
#ifndef ZEROSHARD_NN_DEVICE_SYNC_H_
#define ZEROSHARD_NN_DEVICE_SYNC_H_

#include "absl/status/status.h"
#include "kernels/context.h"

namespace zeroshard {

// CPU: returns OK at once. CUDA: blocks until ctx.cuda_stream's work is done
// (cudaStreamSynchronize; the legacy default stream when it is null);
// kInternal naming a failed kernel.
absl::Status WaitForDevice(const kernels::KernelContext& ctx);

}  // namespace zeroshard

#endif  // ZEROSHARD_NN_DEVICE_SYNC_H_
