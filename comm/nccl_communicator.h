// The NCCL backend: device buffers, stream-ordered collectives.
//
// Bootstrap: one rank per GPU (device = local rank mod GPU count); rank 0 of
// each group creates the NCCL unique id and broadcasts it over MPI.
// Every operation is enqueued on the communicator's own non-blocking stream,
// after an event recorded on the compute stream (SetNcclComputeStream;
// default: the legacy default stream), so it sees everything the caller
// enqueued before it. Issue returns as soon as the work is enqueued.
//
// Waiting, two ways (like c10d):
//   * WaitOnStream(work, stream): `stream` waits on the operation's completion
//     event; the host does not block. This is what compute should use.
//   * Work::Wait(timeout): the host polls the completion event (and NCCL's
//     asynchronous error) until done or `timeout`.
// Send/Recv are batched and launched as one ncclGroupStart/End group when
// something waits on one of them or the next collective is issued (separate
// kernels for a ring of Send+Recv would deadlock).
// Reductions use NCCL's native f16/bf16/f32/i32 arithmetic (ncclAvg for kAvg);
// f16/bf16 therefore accumulate in the low-precision type along NCCL's
// ring/tree: see docs/comm.md for the tolerance the conformance suite uses.
// debug_checks exchange fingerprints over MPI at issue time (host blocks);
// the watchdog aborts the job (ncclCommAbort, then MPI_Abort) when an
// operation has not completed within the timeout.
#ifndef ZEROSHARD_COMM_NCCL_COMMUNICATOR_H_
#define ZEROSHARD_COMM_NCCL_COMMUNICATOR_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"

namespace zeroshard {

// A communicator named "world" over all MPI ranks, one GPU each: `device`,
// or with -1 the local rank's (which then must not exceed the host's GPUs).
// Initialises MPI if needed. kUnavailable without CUDA or without a GPU
// (with the reason).
absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclWorld(const CommOptions& options, int device = -1);

// Makes later operations of `comm` (an NCCL communicator) wait for what is
// enqueued on `cuda_stream` (a cudaStream_t) at issue time.
// kInvalidArgument for a non-NCCL communicator.
absl::Status SetNcclComputeStream(Communicator& comm, void* cuda_stream);

// Enqueues on `cuda_stream` a wait for `work` (from an NCCL communicator);
// returns without blocking the host. kInvalidArgument for other Work.
absl::Status WaitOnStream(Work& work, void* cuda_stream);

}  // namespace zeroshard

#endif  // ZEROSHARD_COMM_NCCL_COMMUNICATOR_H_
