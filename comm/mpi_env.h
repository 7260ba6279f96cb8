// Process-wide MPI set-up shared by the MPI and NCCL backends.
#ifndef ZEROSHARD_COMM_MPI_ENV_H_
#define ZEROSHARD_COMM_MPI_ENV_H_

#include <mpi.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/dtype.h"

namespace zeroshard {

// Exit status of a job the watchdog aborted (what mpirun reports).
inline constexpr int kWatchdogExitCode = 70;

// Initialises MPI with MPI_THREAD_MULTIPLE (every communicator has its own
// progress thread, and they call MPI concurrently) unless it is already
// initialised. kFailedPrecondition when MPI was finalised, or when it runs at
// a lower thread level than MPI_THREAD_MULTIPLE (naming both levels). When it
// initialises MPI it also has glibc keep freed memory, MPI's per-call
// temporaries among it, on the heap for reuse (core/host_heap.h).
absl::Status EnsureMpiInitialized();

// Collective over MPI_COMM_WORLD, for a program's last words: whether this
// rank should print `status` (its result; OK on ranks that succeeded) so
// that an error the ranks agreed on is printed once — by the lowest rank
// whose error is its own (comm/status_agreement.h: not relayed), or, if
// every error is relayed, by the lowest failing rank. True without MPI
// (not initialised, or finalised). Call before FinalizeMpi, on every rank,
// and print before it too: once one rank exits non-zero, mpirun kills the
// rest, and a rank still inside MPI_Finalize would lose its message.
bool ShouldReportError(const absl::Status& status);

// MPI_Finalize if MPI is initialised and not yet finalised. Every
// communicator must be destroyed before.
void FinalizeMpi();

// OK for MPI_SUCCESS, else kInternal "`what` failed: <MPI's error string>".
absl::Status MpiStatus(int mpi_error, absl::string_view what);

// A private duplicate of `group` (its own message space) that returns errors
// instead of aborting, with this process's rank in it and its size.
struct DuplicatedComm {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 0;
};
// Collective over `group`. kInternal "MPI_Comm_dup for <purpose> failed: ...".
absl::StatusOr<DuplicatedComm> DuplicateComm(MPI_Comm group, absl::string_view purpose);

// The MPI type that moves `dtype` verbatim (f16/bf16/u16 as MPI_UINT16_T).
MPI_Datatype MpiRawType(DType dtype);

// Prints "[rank R] zeroshard: <message>; aborting the job" to stderr and
// calls MPI_Abort(MPI_COMM_WORLD, kWatchdogExitCode). Does not return. The
// watchdog's way out of a collective that cannot be cancelled.
[[noreturn]] void AbortJob(const std::string& message);

}  // namespace zeroshard

#endif  // ZEROSHARD_COMM_MPI_ENV_H_
