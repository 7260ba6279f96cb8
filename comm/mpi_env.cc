#include "comm/mpi_env.h"

#include <cstdio>
#include <cstdlib>
#include <limits>

#include "absl/strings/str_cat.h"
#include "comm/status_agreement.h"
#include "core/host_heap.h"

namespace zeroshard {
namespace {

const char* ThreadLevelName(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
  }
  return "unknown thread level";
}

}  // namespace

absl::Status EnsureMpiInitialized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return absl::FailedPreconditionError("MPI was already finalized; cannot create a communicator");
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    // Open MPI's tuned collectives allocate temporaries the size of the
    // message on every call (recursive doubling's reduce_scatter_block); as
    // fresh mappings their pages faulted in during the collective.
    KeepFreedHostMemory();
    int err = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (err != MPI_SUCCESS) return MpiStatus(err, "MPI_Init_thread(MPI_THREAD_MULTIPLE)");
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    return absl::FailedPreconditionError(absl::StrCat("MPI provides ", ThreadLevelName(provided),
                                                      "; zeroshard needs MPI_THREAD_MULTIPLE (one progress "
                                                      "thread per communicator)"));
  }
  return absl::OkStatus();
}

bool ShouldReportError(const absl::Status& status) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return !status.ok();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int none = std::numeric_limits<int>::max();
  int mine[2] = {!status.ok() && !IsRelayedError(status) ? rank : none, !status.ok() ? rank : none};
  int lowest[2] = {none, none};
  if (MPI_Allreduce(mine, lowest, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS) return !status.ok();
  if (status.ok()) return false;
  return lowest[0] != none ? lowest[0] == rank : lowest[1] == rank;
}

void FinalizeMpi() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

absl::Status MpiStatus(int mpi_error, absl::string_view what) {
  if (mpi_error == MPI_SUCCESS) return absl::OkStatus();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(mpi_error, text, &len);
  return absl::InternalError(absl::StrCat(what, " failed: ", absl::string_view(text, len)));
}

absl::StatusOr<DuplicatedComm> DuplicateComm(MPI_Comm group, absl::string_view purpose) {
  DuplicatedComm d;
  const int err = MPI_Comm_dup(group, &d.comm);
  if (err != MPI_SUCCESS) return MpiStatus(err, absl::StrCat("MPI_Comm_dup for ", purpose));
  MPI_Comm_set_errhandler(d.comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(d.comm, &d.rank);
  MPI_Comm_size(d.comm, &d.size);
  return d;
}

MPI_Datatype MpiRawType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return MPI_FLOAT;
    case DType::kI32:
      return MPI_INT32_T;
    case DType::kF16:
    case DType::kBF16:
    case DType::kU16:
      return MPI_UINT16_T;
    case DType::kI8:
      return MPI_INT8_T;
  }
  return MPI_BYTE;
}

void AbortJob(const std::string& message) {
  int rank = -1;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "[rank %d] zeroshard: %s; aborting the job\n", rank, message.c_str());
  std::fflush(stderr);
  if (initialized) MPI_Abort(MPI_COMM_WORLD, kWatchdogExitCode);
  std::_Exit(kWatchdogExitCode);
}

}  // namespace zeroshard
