// The communication API every other layer codes against (docs/comm.md).
//
// Shaped after PyTorch c10d: a Communicator issues flat-buffer collectives and
// returns a Work handle for each; backends (MPI: comm/mpi_communicator.h,
// NCCL: comm/nccl_communicator.h) implement it and pass one conformance suite
// (tests/comm_conformance_test.cc).
//
// Contract: every rank of a communicator issues the same collectives (same op,
// count, dtype, root) in the same order. With CommOptions::debug_checks the
// backend verifies this before each collective and fails every rank with a
// message naming the ranks that disagree; otherwise a violation is undefined
// (typically a hang that the watchdog turns into an abort).
//
// Asynchrony: every call returns immediately with a Work. The buffers must stay
// valid and unmodified (outputs: untouched) until Wait() has returned OK or
// IsCompleted() is true. Collectives on one communicator execute in issue
// order; collectives on different communicators are independent.
#ifndef ZEROSHARD_COMM_COMMUNICATOR_H_
#define ZEROSHARD_COMM_COMMUNICATOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/comm_stats.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/memory_tracker.h"

namespace zeroshard {

// kAvg is the sum divided by size(). For f32/f16/bf16 the division happens in
// f32 after the sum; for i32 it truncates toward zero (C++ integer division).
enum class ReduceOp { kSum, kAvg, kMax };

// "sum", "avg", "max".
const char* ReduceOpName(ReduceOp op);

// When an operation ran: from the moment its backend started executing it
// (after any queueing behind earlier operations) to its completion, on the
// host's steady clock. Timeline traces (core/timeline.h) draw it.
struct WorkSpan {
  std::chrono::steady_clock::time_point start;
  std::chrono::steady_clock::time_point end;
};

// Handle to one issued operation. Thread-compatible: one thread at a time.
class Work {
 public:
  virtual ~Work() = default;
  // Once completed: when the operation executed, if the backend knows (the
  // MPI backend does; NCCL runs on the device and reports nothing). nullopt
  // before completion.
  virtual std::optional<WorkSpan> ExecutedSpan() { return std::nullopt; }
  // True once the operation has finished, successfully or not; never blocks.
  virtual bool IsCompleted() = 0;
  // Blocks the host until the operation has finished or `timeout` passed.
  // Returns the operation's status: OK, its argument error
  // (kInvalidArgument), a collective mismatch (kFailedPrecondition), a
  // transport error (kInternal); kDeadlineExceeded if `timeout` passed first
  // (the operation keeps running; Wait may be called again). For NCCL, see
  // nccl_communicator.h for the stream-ordered alternative.
  virtual absl::Status Wait(absl::Duration timeout = absl::InfiniteDuration()) = 0;
  // Stream-ordered wait: work enqueued on `cuda_stream` (a cudaStream_t;
  // nullptr: the legacy default stream) after this call sees the
  // operation's result. A backend that runs on the device (NCCL) makes the
  // stream wait for the operation's completion event and returns without
  // blocking the host (an error here is one of enqueueing the wait; the
  // operation's own failure surfaces at a later Wait or in the watchdog).
  // Host backends wait on the host, like Wait().
  virtual absl::Status WaitOn(void* cuda_stream) {
    (void)cuda_stream;
    return Wait();
  }
};

struct CommOptions {
  // Compare a fingerprint (sequence number, op, count, dtype, root) across the
  // group before every collective. Costs one small all-to-all per collective.
  bool debug_checks = false;
  // A collective running longer than this aborts the whole job after printing
  // which collective and which ranks never arrived or did not answer (MPI:
  // comm/arrival_probe.h, or debug_checks' fingerprints; NCCL: only with
  // debug_checks).
  // absl::InfiniteDuration() disables the watchdog.
  absl::Duration timeout = absl::Minutes(5);
  // Staging buffers (f32 accumulation of f16/bf16 reductions) are counted here
  // under MemoryCategory::kCommBuffers when not null. Must outlive every
  // communicator created with these options.
  MemoryTracker* tracker = nullptr;
};

// A group of ranks that run collectives together. Thread-compatible: issue
// calls from one thread at a time (the order of calls defines the order of
// collectives). Destruction waits for every issued operation to finish.
class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "world", "dp", "tp", "pp" or what Split was given; used in error messages.
  virtual const std::string& name() const = 0;
  // Where buffers must live: kCpu for MPI, kCuda for NCCL.
  virtual Device device() const = 0;

  // Reductions (ReduceScatter, AllReduce) take f32, f16, bf16 and i32; u16
  // and i8 are kInvalidArgument. The other collectives move any dtype.

  // out[r*count .. (r+1)*count) = rank r's `in` (count elements per rank;
  // out holds size()*count). `in` may equal out + rank()*count (in place);
  // otherwise they must not overlap.
  virtual std::unique_ptr<Work> AllGather(const void* in, void* out, int64_t count, DType dtype) = 0;
  // out = op over ranks of in[rank()*count .. (rank()+1)*count); `in` holds
  // size()*count elements, `out` holds count. They must not overlap.
  virtual std::unique_ptr<Work> ReduceScatter(const void* in, void* out, int64_t count, DType dtype,
                                              ReduceOp op) = 0;
  // Personalised exchange: `in` holds size()*count elements, block r
  // (elements [r*count, (r+1)*count)) goes to rank r; afterwards
  // out[r*count .. (r+1)*count) = block rank() of rank r's `in`. Any dtype
  // (bytes are moved, nothing is computed). in and out must not overlap.
  virtual std::unique_ptr<Work> AllToAll(const void* in, void* out, int64_t count, DType dtype) = 0;
  // buf = op over ranks of buf, in place.
  virtual std::unique_ptr<Work> AllReduce(void* buf, int64_t count, DType dtype, ReduceOp op) = 0;
  // buf = root's buf on every rank.
  virtual std::unique_ptr<Work> Broadcast(void* buf, int64_t count, DType dtype, int root) = 0;
  // Point-to-point within this communicator; matched by (peer, tag) in issue
  // order. Not collectives: they get no fingerprint check, but the watchdog
  // still bounds them. tag must be in [0, 32767].
  virtual std::unique_ptr<Work> Send(const void* buf, int64_t count, DType dtype, int peer, int tag) = 0;
  virtual std::unique_ptr<Work> Recv(void* buf, int64_t count, DType dtype, int peer, int tag) = 0;
  virtual std::unique_ptr<Work> Barrier() = 0;

  // Collective over this communicator (queued after everything issued
  // before it, and waited for): ranks with equal `color` form a new
  // communicator ordered by (key, rank here). The result has this
  // communicator's options. color must be >= 0.
  virtual absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key, const std::string& name) = 0;

  // Counters of every call issued so far (see comm_stats.h for the byte
  // convention). Counted at issue time, including calls that later fail.
  virtual CommStats Stats() const = 0;
};

// The element count per rank when `total` elements are split evenly over
// `ranks` (ReduceScatter input / AllGather output of `total` elements).
// kInvalidArgument when it does not divide: callers pad `total` to a multiple
// of `ranks`.
absl::StatusOr<int64_t> EvenShardCount(int64_t total, int ranks);

}  // namespace zeroshard

#endif  // ZEROSHARD_COMM_COMMUNICATOR_H_
