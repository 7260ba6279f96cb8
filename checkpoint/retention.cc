#include "checkpoint/retention.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint_root.h"
#include "checkpoint/verify.h"
#include "core/file_io.h"
#include "core/status_macros.h"

namespace zeroshard {
namespace {

// VerifyCheckpoint's first problem, or OK.
absl::Status FirstProblem(const std::string& dir) {
  std::vector<absl::Status> problems = VerifyCheckpoint(dir);
  if (problems.empty()) return absl::OkStatus();
  if (problems.size() == 1) return problems[0];
  return absl::Status(problems[0].code(),
                      absl::StrCat(problems[0].message(), " (and ", problems.size() - 1, " more problems)"));
}

std::string Describe(const RejectedCheckpoint& r) {
  return absl::StrCat(r.dir, " fails verification: ", r.problem.message());
}

}  // namespace

std::string ResumePoint::FallbackWarning() const {
  if (rejected.empty()) return "";
  std::vector<std::string> parts;
  for (const RejectedCheckpoint& r : rejected) parts.push_back(Describe(r));
  return absl::StrCat("checkpoint ", absl::StrJoin(parts, "; "), "; resuming from ", dir, " (step ", step,
                      "), the newest that verifies");
}

absl::StatusOr<ResumePoint> FindResumeCheckpoint(const std::string& root) {
  ASSIGN_OR_RETURN(std::vector<int64_t> steps, ListCheckpointSteps(root));
  ResumePoint point;
  // Steps above the one `latest` names were never the commit point.
  int64_t newest = steps.empty() ? -1 : steps.back();
  absl::StatusOr<std::string> latest = ResolveCheckpointDir(root);
  if (latest.ok()) {
    bool named = false;
    for (int64_t s : steps) {
      if (JoinPath(root, StepDirName(s)) == *latest) {
        newest = s;
        named = true;
      }
    }
    if (!named) return absl::NotFoundError(absl::StrCat("'", root, "' holds no committed step_<N> directory"));
  } else if (!absl::IsNotFound(latest.status())) {
    point.rejected.push_back({JoinPath(root, kLatestFileName), latest.status()});
  }
  if (steps.empty()) {
    return absl::NotFoundError(absl::StrCat("no checkpoint under '", root, "': it holds no committed step_<N>"));
  }
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (*it > newest) continue;
    const std::string dir = JoinPath(root, StepDirName(*it));
    absl::Status problem = FirstProblem(dir);
    if (problem.ok()) {
      point.dir = dir;
      point.step = *it;
      return point;
    }
    point.rejected.push_back({dir, problem});
  }
  std::vector<std::string> parts;
  for (const RejectedCheckpoint& r : point.rejected) parts.push_back(Describe(r));
  return absl::DataLossError(
      absl::StrCat("no checkpoint under '", root, "' verifies: ", absl::StrJoin(parts, "; ")));
}

absl::Status PruneCheckpointsKeepingVerified(const std::string& root, int keep_last, const std::string& keep_tmp,
                                             int64_t written_step) {
  int64_t verified = -1;
  if (keep_last > 0) {
    ASSIGN_OR_RETURN(std::vector<int64_t> steps, ListCheckpointSteps(root));
    if (steps.size() > static_cast<size_t>(keep_last)) {
      for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
        if (*it == written_step || VerifyCheckpoint(JoinPath(root, StepDirName(*it))).empty()) {
          verified = *it;
          break;
        }
      }
    }
  }
  return PruneCheckpoints(root, keep_last, keep_tmp, verified);
}

}  // namespace zeroshard
