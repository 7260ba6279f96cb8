// Collective agreement on success: every rank passes its local status, and
// every rank gets an error if any rank failed, so no rank goes on to a
// collective the others will never join.
#ifndef ZEROSHARD_CHECKPOINT_RANK_AGREEMENT_H_
#define ZEROSHARD_CHECKPOINT_RANK_AGREEMENT_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "comm/communicator.h"

namespace zeroshard {

// Collective over `comm`. Returns `local` on a rank that failed; on the
// others, an error with the code of the lowest failing rank, saying `what`
// failed there ("see its error"). OK only when every rank passed OK.
absl::Status AgreeAcrossRanks(Communicator& comm, const absl::Status& local, absl::string_view what);

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_RANK_AGREEMENT_H_
