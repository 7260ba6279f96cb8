#include "checkpoint/checkpoint_root.h"

#include <algorithm>
#include <functional>
#include <random>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "checkpoint/manifest.h"
#include "core/file_io.h"
#include "core/status_macros.h"

namespace zeroshard {
namespace {

// The N of "step_<N>", or -1.
int64_t ParseStepDirName(absl::string_view name) {
  int64_t step = -1;
  if (!absl::ConsumePrefix(&name, "step_") || name.empty()) return -1;
  for (char c : name) {
    if (c < '0' || c > '9') return -1;
  }
  if (!absl::SimpleAtoi(name, &step)) return -1;
  return step;
}

}  // namespace

std::string StepDirName(int64_t step) { return absl::StrCat("step_", step); }

std::string TempStepDirName(int64_t step, const std::string& nonce) {
  return absl::StrCat(".tmp_step_", step, "_", nonce);
}

absl::StatusOr<std::string> ResolveCheckpointDir(const std::string& dir_or_root) {
  if (PathExists(JoinPath(dir_or_root, kManifestFileName))) return dir_or_root;
  const std::string latest = JoinPath(dir_or_root, kLatestFileName);
  if (!PathExists(latest)) {
    if (!IsDirectory(dir_or_root)) {
      return absl::NotFoundError(absl::StrCat("checkpoint '", dir_or_root, "' does not exist"));
    }
    return absl::NotFoundError(absl::StrCat("'", dir_or_root, "' holds neither ", kManifestFileName,
                                            " (a step directory) nor '", kLatestFileName, "' (a checkpoint root)"));
  }
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(latest));
  absl::string_view name = text;
  absl::ConsumeSuffix(&name, "\n");
  if (ParseStepDirName(name) < 0) {
    return absl::DataLossError(absl::StrCat("'", latest, "' holds '", absl::CEscape(text.substr(0, 64)),
                                            "', expected 'step_<N>'"));
  }
  const std::string dir = JoinPath(dir_or_root, name);
  if (!IsDirectory(dir)) {
    return absl::DataLossError(absl::StrCat("'", latest, "' names ", name, ", which does not exist"));
  }
  return dir;
}

absl::StatusOr<std::vector<int64_t>> ListCheckpointSteps(const std::string& root) {
  std::vector<int64_t> steps;
  if (!IsDirectory(root)) return steps;
  ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirectory(root));
  for (const std::string& n : names) {
    const int64_t s = ParseStepDirName(n);
    if (s >= 0 && IsDirectory(JoinPath(root, n))) steps.push_back(s);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

absl::Status CommitStepDirectory(const std::string& root, const std::string& tmp_dir, int64_t step) {
  RETURN_IF_ERROR(SyncDirectory(tmp_dir));
  const std::string final_dir = JoinPath(root, StepDirName(step));
  std::string replaced;
  // How to put the directories back if `latest` cannot be replaced.
  std::function<absl::Status()> undo;
  if (PathExists(final_dir)) {
    // Re-saving a step: swap the new directory in atomically (step_<N> always
    // exists); the old one, now under tmp_dir's name, goes after `latest`.
    absl::Status swapped = ExchangePaths(tmp_dir, final_dir);
    if (swapped.ok()) {
      replaced = tmp_dir;
      undo = [&] { return ExchangePaths(tmp_dir, final_dir); };
    } else if (absl::IsUnimplemented(swapped)) {
      // No RENAME_EXCHANGE here: two renames, with a moment without step_<N>.
      replaced = JoinPath(root, absl::StrCat(".replaced_", StepDirName(step), "_", std::random_device{}()));
      RETURN_IF_ERROR(RenamePath(final_dir, replaced));
      undo = [&] {
        RETURN_IF_ERROR(RenamePath(final_dir, tmp_dir));
        return RenamePath(replaced, final_dir);
      };
      if (absl::Status moved = RenamePath(tmp_dir, final_dir); !moved.ok()) {
        absl::Status back = RenamePath(replaced, final_dir);
        if (back.ok()) return moved;
        return absl::Status(moved.code(),
                            absl::StrCat(moved.message(), "; restoring ", final_dir, " failed too: ", back.message()));
      }
    } else {
      return swapped;
    }
  } else {
    RETURN_IF_ERROR(RenamePath(tmp_dir, final_dir));
    undo = [&] { return RenamePath(final_dir, tmp_dir); };
  }
  const std::string latest_tmp = JoinPath(root, absl::StrCat(kLatestFileName, ".tmp"));
  absl::Status pointed = [&]() -> absl::Status {
    RETURN_IF_ERROR(SyncDirectory(root));
    const std::string content = absl::StrCat(StepDirName(step), "\n");
    RETURN_IF_ERROR(WriteFileDurably(latest_tmp, {content}));
    return RenamePath(latest_tmp, JoinPath(root, kLatestFileName));
  }();
  if (!pointed.ok()) {
    // `latest` still names the previous step: so must step_<N> again, with
    // the new directory back under tmp_dir's name for the caller to remove.
    if (PathExists(latest_tmp) && !IsDirectory(latest_tmp)) (void)RemoveTree(latest_tmp);
    absl::Status undone = undo();
    if (!undone.ok()) {
      return absl::Status(pointed.code(), absl::StrCat(pointed.message(), "; restoring ", final_dir,
                                                       " failed too: ", undone.message()));
    }
    return pointed;
  }
  RETURN_IF_ERROR(SyncDirectory(root));
  if (!replaced.empty()) RETURN_IF_ERROR(RemoveTree(replaced));
  return absl::OkStatus();
}

absl::Status PruneCheckpoints(const std::string& root, int keep_last, const std::string& keep_tmp,
                              int64_t also_keep) {
  if (!IsDirectory(root)) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirectory(root));
  for (const std::string& n : names) {
    if ((absl::StartsWith(n, ".tmp_step_") || absl::StartsWith(n, ".replaced_step_")) && n != keep_tmp) {
      RETURN_IF_ERROR(RemoveTree(JoinPath(root, n)));
    }
  }
  if (keep_last <= 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<int64_t> steps, ListCheckpointSteps(root));
  std::string latest;
  absl::StatusOr<std::string> resolved = ResolveCheckpointDir(root);
  if (resolved.ok()) latest = *resolved;
  for (size_t i = 0; i + keep_last < steps.size(); ++i) {
    const std::string dir = JoinPath(root, StepDirName(steps[i]));
    if (dir == latest || steps[i] == also_keep) continue;
    RETURN_IF_ERROR(RemoveTree(dir));
  }
  return absl::OkStatus();
}

}  // namespace zeroshard
