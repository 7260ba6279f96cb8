// Which committed checkpoints of a root are kept and which one a resume
// reads, decided by verification (checkpoint/verify.h), not by names alone:
// a corrupt newest step never costs the run its last good one.
#ifndef ZEROSHARD_CHECKPOINT_RETENTION_H_
#define ZEROSHARD_CHECKPOINT_RETENTION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zeroshard {

// A committed step that failed verification, with its first problem.
struct RejectedCheckpoint {
  std::string dir;
  absl::Status problem;
};

// The step a resume reads: the one `latest` names when it verifies, else the
// newest earlier committed step that verifies.
struct ResumePoint {
  std::string dir;
  int64_t step = 0;
  // Newer candidates passed over, newest first (empty: `latest` verified).
  std::vector<RejectedCheckpoint> rejected;
  // One line naming the rejected `latest` with its problem and the step
  // used; empty when nothing was passed over.
  std::string FallbackWarning() const;
};

// Candidates, newest first: the step `latest` names (when it is readable and
// exists), then every committed step below it, descending (steps above the
// one `latest` names are not committed as latest and are skipped). The first
// whose VerifyCheckpoint finds no problem is chosen. kNotFound naming the
// root when it holds no committed step; kDataLoss naming every candidate and
// its problem when none verifies.
absl::StatusOr<ResumePoint> FindResumeCheckpoint(const std::string& root);

// PruneCheckpoints (checkpoint/checkpoint_root.h) that also keeps the newest
// step that verifies when it is older than the newest keep_last. Only as many
// steps are verified, newest first, as it takes to find one that verifies,
// and none when there is nothing to delete. `written_step`, the step the
// caller has just written and committed, counts as verified without being
// read back: its checksums were taken from the very bytes written and
// fsynced, and a read-back would mostly return them from the page cache.
absl::Status PruneCheckpointsKeepingVerified(const std::string& root, int keep_last,
                                             const std::string& keep_tmp = "", int64_t written_step = -1);

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_RETENTION_H_
