// AsyncIo: asynchronous reads and writes of anonymous, preallocated files
// through one io_uring (liburing), the NVMe tier's only I/O path
// (docs/offload.md). Usable without the engine.
//
// Files: OpenFile creates a file in a directory that cannot outlive the
// process (O_TMPFILE, else created and unlinked at once; where neither
// works the name carries the pid and stale files of dead processes are
// removed at start-up) and preallocates it (fallocate). It is opened
// O_DIRECT; where the filesystem refuses O_DIRECT (ramfs) it is opened
// buffered and one warning per process goes to stderr.
//
// Requests: Read/Write queue one request and return its ticket; queued
// requests are submitted in batches (at most queue_depth in flight; more
// wait in the queue). Completions are polled by Poll/Wait from the calling
// thread (no thread of its own). Under O_DIRECT the buffer, the offset and
// the length must be multiples of kIoAlignment (AlignedBuffer gives such
// buffers); kInvalidArgument otherwise, naming the value. Short transfers
// are resubmitted for the rest; a transfer that makes no progress, a read
// past the file's end, or an errno is an error naming the file's label,
// the offset, the length and strerror.
//
// Ordering: a request that overlaps an earlier, unfinished request on the
// same file's bytes, where either writes, is not submitted before that one
// completes (read-after-write and write-after-write per region). Likewise
// a request whose buffer overlaps an unfinished earlier one's, where
// either reads: a read into a buffer that a write is still sending waits
// in the queue, and Progress/Poll/Wait submit it once that write's
// completion is reaped, so a caller may queue a buffer's next read right
// after its write without waiting in between.
//
// Thread-compatible: one thread drives an AsyncIo.
#ifndef ZEROSHARD_OFFLOAD_ASYNC_IO_H_
#define ZEROSHARD_OFFLOAD_ASYNC_IO_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/memory_tracker.h"

namespace zeroshard {

inline constexpr int64_t kIoAlignment = 4096;

struct AsyncIoOptions {
  int queue_depth = 8;      // requests in flight, [1, 256]
  bool direct = true;       // false: always buffered (no warning)
};

// Per AsyncIo, since Create (or ResetStats).
struct IoStats {
  int64_t read_bytes = 0;
  int64_t write_bytes = 0;
  int64_t reads = 0;
  int64_t writes = 0;
  // Wall time with at least one request in flight.
  double busy_seconds = 0;
};

using IoTicket = int64_t;

class AsyncIo {
 public:
  // kInvalidArgument for a queue depth out of range; kUnavailable naming
  // errno when the kernel refuses an io_uring.
  static absl::StatusOr<std::unique_ptr<AsyncIo>> Create(const AsyncIoOptions& options);
  virtual ~AsyncIo() = default;

  // A new anonymous file of `bytes` (rounded up to kIoAlignment) in `dir`;
  // `label` names it in errors ("rank 1 optimizer_state"). Returns its
  // index. kFailedPrecondition naming the directory when it is missing or
  // not writable; kResourceExhausted naming the directory and the bytes
  // when preallocation fails for space.
  virtual absl::StatusOr<int> OpenFile(const std::string& dir, const std::string& label, int64_t bytes) = 0;
  // Whether file `file` is opened O_DIRECT (false after the fallback).
  virtual bool direct(int file) const = 0;
  virtual int64_t file_bytes(int file) const = 0;
  // The path the kernel reports for the open file (/proc/self/fd/N's
  // target), for diagnostics and fault tests.
  virtual std::string file_path(int file) const = 0;

  virtual absl::StatusOr<IoTicket> Read(int file, int64_t offset, void* buffer, int64_t bytes) = 0;
  virtual absl::StatusOr<IoTicket> Write(int file, int64_t offset, const void* buffer, int64_t bytes) = 0;

  // Reaps completions without blocking and submits what waits; true when
  // `ticket` has completed (its error, if any, is returned by Wait).
  virtual bool Poll(IoTicket ticket) = 0;
  // Submits what waits in the queue now, without reaping (Poll and Wait do
  // it too); for a caller that queues a batch and computes before polling.
  virtual void Flush() {}
  // Reaps completions without blocking and submits what waits (requests
  // beyond queue_depth, resubmitted short transfers): a caller that computes
  // between its I/O calls keeps the queue full by calling it in between.
  virtual void Progress() { Flush(); }
  // Blocks until `ticket` completes; its error. A ticket is waited once.
  virtual absl::Status Wait(IoTicket ticket) = 0;
  // Waits for every request; the first error. Every ticket issued so far
  // counts as waited afterwards.
  virtual absl::Status WaitAll() = 0;
  // Requests issued and not yet completed: queued or submitted.
  virtual int in_flight() const = 0;

  virtual IoStats stats() const = 0;
  virtual void ResetStats() = 0;
};

// A host buffer aligned to kIoAlignment, counted in `tracker` under
// `category` (null tracker: uncounted). Move-only.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  // `bytes` rounded up to kIoAlignment; contents zero.
  static absl::StatusOr<AlignedBuffer> Allocate(int64_t bytes, MemoryTracker* tracker, MemoryCategory category);

  void* data() { return data_; }
  const void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }

 private:
  void Reset();
  void* data_ = nullptr;
  int64_t bytes_ = 0;
  MemoryTracker* tracker_ = nullptr;
  MemoryCategory category_ = MemoryCategory::kWorkspace;
};

// The smallest multiple of kIoAlignment >= bytes.
inline int64_t AlignIo(int64_t bytes) { return (bytes + kIoAlignment - 1) / kIoAlignment * kIoAlignment; }

// Facts about the filesystem under `dir`, for the memory planner.
struct FilesystemInfo {
  bool ram_backed = false;     // tmpfs or ramfs: its files are memory
  std::string type;            // "tmpfs", "ramfs", "ext4", ...
  int64_t available_bytes = 0; // statvfs f_bavail * f_frsize
  bool writable = false;
};
absl::StatusOr<FilesystemInfo> InspectFilesystem(const std::string& dir);

}  // namespace zeroshard

#endif  // ZEROSHARD_OFFLOAD_ASYNC_IO_H_
