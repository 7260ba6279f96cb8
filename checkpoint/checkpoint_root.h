// The directory layout of a checkpoint root (docs/checkpoint_format.md):
//
//   <root>/step_<N>/manifest.pbtxt, rank_<r>.safetensors   committed steps
//   <root>/latest                                           "step_<N>\n"
//   <root>/.tmp_step_<N>_<nonce>/                           a save in progress
//
// A save writes everything into a temporary directory, and only then
// CommitStepDirectory renames it to step_<N> and replaces `latest` (written
// to latest.tmp, fsynced, renamed). A process killed at any point before the
// rename leaves the previous step and `latest` untouched. Not collective:
// rank 0 (or an offline tool) calls these.
#ifndef ZEROSHARD_CHECKPOINT_CHECKPOINT_ROOT_H_
#define ZEROSHARD_CHECKPOINT_CHECKPOINT_ROOT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zeroshard {

inline constexpr char kLatestFileName[] = "latest";

// "step_<N>" (no padding).
std::string StepDirName(int64_t step);
// ".tmp_step_<N>_<nonce>".
std::string TempStepDirName(int64_t step, const std::string& nonce);

// A step directory for `dir_or_root`: the path itself when it holds a
// manifest.pbtxt, else the step `<path>/latest` names. kNotFound naming the
// path when neither exists; kDataLoss when `latest` is malformed or names a
// missing directory.
absl::StatusOr<std::string> ResolveCheckpointDir(const std::string& dir_or_root);

// Steps of the committed step_<N> directories under root, ascending. Empty
// when root does not exist.
absl::StatusOr<std::vector<int64_t>> ListCheckpointSteps(const std::string& root);

// fsyncs tmp_dir, renames it to <root>/step_<N> (an existing step_<N> is
// swapped with it atomically and deleted after; where the file system cannot
// swap, moved aside first), fsyncs root, then atomically points `latest` at it.
// An error before `latest` points at it leaves step_<N> and `latest` as they
// were and the new directory at tmp_dir (the caller removes it); one after
// (fsyncing root, deleting a replaced step_<N>) leaves the step committed.
absl::Status CommitStepDirectory(const std::string& root, const std::string& tmp_dir, int64_t step);

// Deletes all but the newest keep_last step directories (never the one
// `latest` names, nor step `also_keep` when >= 0) and abandoned .tmp_step_*
// directories other than `keep_tmp`. keep_last <= 0 keeps every step
// (temporaries are still removed). Verification-aware retention is
// PruneCheckpointsKeepingVerified (checkpoint/retention.h).
absl::Status PruneCheckpoints(const std::string& root, int keep_last, const std::string& keep_tmp = "",
                              int64_t also_keep = -1);

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_CHECKPOINT_ROOT_H_
