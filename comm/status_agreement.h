// Collective agreement on success: every rank passes its local status, and
// every rank gets an error if any rank failed, so no rank goes on to a
// collective the others will never join.
#ifndef ZEROSHARD_COMM_STATUS_AGREEMENT_H_
#define ZEROSHARD_COMM_STATUS_AGREEMENT_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "comm/communicator.h"

namespace zeroshard {

// Collective over `comm` (one AllReduce of size() i32 in host memory).
// Returns `local` on a rank that failed; on the others, an error with the
// code of the lowest failing rank, saying `what` failed there, e.g.
// "writing a shard file failed on dp rank 2 (see its error); this rank (0)
// was fine" (the group is comm.name() up to its first '.', so a control
// duplicate "dp.control" says "dp"). OK only when every rank passed OK.
absl::Status AgreeAcrossRanks(Communicator& comm, const absl::Status& local, absl::string_view what);

// Like AgreeAcrossRanks, but every rank returns the same error: the lowest
// failing rank's code and "`what` failed on <group> rank r: <its message>",
// so each rank's caller sees the cause (relayed on the ranks other than r).
// One Broadcast more than AgreeAcrossRanks when a rank failed.
absl::Status AgreeAcrossRanksSharingError(Communicator& comm, const absl::Status& local, absl::string_view what);

// The error a rank returns for ANOTHER rank's failure ("... failed on dp
// rank 2 (see its error)"). It carries a mark, so that a launcher printing
// one error per job prints the failing rank's own (ShouldReportError in
// comm/mpi_env.h) rather than a pointer to it.
absl::Status RelayedError(absl::StatusCode code, absl::string_view message);
bool IsRelayedError(const absl::Status& status);

}  // namespace zeroshard

#endif  // ZEROSHARD_COMM_STATUS_AGREEMENT_H_
