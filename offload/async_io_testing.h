// Fault injection into AsyncIo, for fault tests only (docs/offload_io.md
// "Fault injection"): nothing in the library or the engine calls it. A
// test reaches the engine's AsyncIo through its OffloadStore.
#ifndef ZEROSHARD_OFFLOAD_ASYNC_IO_TESTING_H_
#define ZEROSHARD_OFFLOAD_ASYNC_IO_TESTING_H_

#include <cerrno>
#include <cstdint>

#include "absl/status/status.h"
#include "offload/async_io.h"

namespace zeroshard {

// The `nth` read (or write) issued after arming completes with errno
// `error` and moves no data. It goes through the ring like any request
// (same ordering, same completion path), so the error it yields is the one
// a real failure of that errno yields. One fault at a time: arming again
// replaces a fault not yet hit; a hit fault is spent.
struct IoFault {
  bool write = false;  // counts writes, else reads
  int64_t nth = 1;     // 1: the next one
  int error = EIO;     // an errno; EAGAIN and EINTR are retried, not failures
};

// kInvalidArgument naming the value for nth < 1 or an error that is not a
// failure errno, or for an AsyncIo that is not AsyncIo::Create's.
absl::Status InjectIoFaultForTesting(AsyncIo& io, const IoFault& fault);

}  // namespace zeroshard

#endif  // ZEROSHARD_OFFLOAD_ASYNC_IO_TESTING_H_
