// Threads DeviceMemset (core/device.h) uses on the host: a large buffer is
// split into contiguous parts, each set by its own thread, because one
// core's stores do not reach the memory bandwidth (a 500 MB gradient buffer:
// 52 ms on one thread, 27 ms on two, on the 2-core dev machine).
#ifndef ZEROSHARD_CORE_HOST_MEMSET_THREADS_H_
#define ZEROSHARD_CORE_HOST_MEMSET_THREADS_H_

namespace zeroshard {

// n < 1 counts as 1; 1 until set. kernels::SetCpuThreads sets it to the
// kernel thread count.
void SetHostMemsetThreads(int n);

}  // namespace zeroshard

#endif  // ZEROSHARD_CORE_HOST_MEMSET_THREADS_H_
