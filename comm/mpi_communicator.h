// The MPI backend: host buffers, one progress thread per communicator.
//
// Each communicator owns a duplicate of its MPI communicator and a progress
// thread that drains a FIFO of issued operations, so the caller computes
// while MPI moves bytes. Collectives run as blocking MPI calls in issue order;
// Send/Recv are posted as MPI_Isend/MPI_Irecv and polled, so a rank may issue
// Send and Recv to the same peer before waiting on either.
//
// Who executes: one thread at a time holds the communicator's executor
// token. Usually the progress thread; but a caller blocking in Work::Wait
// while the progress thread is not executing takes the token and runs the
// queued operations up to its own on its own thread. Issue-then-wait thus
// costs no thread hand-off (two scheduler wake-ups otherwise, ~10 µs each on
// a busy host), while issue-compute-wait still overlaps.
//
// Reductions: f32 and i32 reduce natively (MPI_SUM / MPI_MAX). f16 and bf16
// are widened to f32 in a staging buffer, reduced in f32 by MPI, and rounded
// back once (nearest even): the result is the f32 sum (in MPI's order) rounded
// to the dtype, exact whenever the f32 sum is. kAvg divides the f32 (or i32)
// sum by size(). Staging is counted under kCommBuffers in options.tracker.
//
// Errors: arguments are checked at issue time (kInvalidArgument, nothing is
// queued and no sequence number is used). A failed collective (mismatch, MPI
// error) leaves the communicator unusable: later operations fail with
// kFailedPrecondition quoting the first error.
#ifndef ZEROSHARD_COMM_MPI_COMMUNICATOR_H_
#define ZEROSHARD_COMM_MPI_COMMUNICATOR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "comm/mpi_env.h"

namespace zeroshard {

// A communicator named "world" over every rank of MPI_COMM_WORLD (a private
// duplicate). Calls EnsureMpiInitialized() first. Collective: every rank calls it.
absl::StatusOr<std::unique_ptr<Communicator>> CreateMpiWorld(const CommOptions& options);

// A communicator over (a private duplicate of) `group`, which the caller
// keeps owning. Collective over `group`.
absl::StatusOr<std::unique_ptr<Communicator>> CreateMpiCommunicator(MPI_Comm group, const std::string& name,
                                                                    const CommOptions& options);

}  // namespace zeroshard

#endif  // ZEROSHARD_COMM_MPI_COMMUNICATOR_H_
