// The fingerprint exchange behind comm.debug_checks.
//
// Every rank sends its fingerprint to every other rank on a private duplicate
// of the group's communicator (so it never matches user traffic) and polls
// the receives, reporting each arrival to the watchdog: if a rank never
// comes, the watchdog names it. When all have arrived, every rank holds the
// same fingerprints and so reaches the same verdict and the same message.
// Cost: 2(n-1) messages of 48 bytes per collective. Debug use only.
#ifndef ZEROSHARD_COMM_COLLECTIVE_CHECKER_H_
#define ZEROSHARD_COMM_COLLECTIVE_CHECKER_H_

#include <mpi.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/fingerprint.h"
#include "comm/watchdog.h"

namespace zeroshard {

class CollectiveChecker {
 public:
  // Duplicates `group` (collective over it). The checker frees its duplicate.
  static absl::StatusOr<std::unique_ptr<CollectiveChecker>> Create(MPI_Comm group, std::string name);
  ~CollectiveChecker();

  // OK when every rank passed an equal fingerprint; kFailedPrecondition with
  // DescribeMismatch's message otherwise; kInternal on MPI errors. Blocks
  // until every rank has called Check (the watchdog bounds the wait).
  // One thread at a time.
  absl::Status Check(const CollectiveFingerprint& mine, CollectiveWatchdog* watchdog);

 private:
  CollectiveChecker(MPI_Comm comm, std::string name, int rank, int size)
      : comm_(comm), name_(std::move(name)), rank_(rank), size_(size) {}

  MPI_Comm comm_;
  const std::string name_;
  const int rank_;
  const int size_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_COMM_COLLECTIVE_CHECKER_H_
