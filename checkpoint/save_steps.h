// The steps of a sharded save that SaveCheckpoint (checkpoint/engine_checkpoint.h)
// and the asynchronous save (checkpoint/async_checkpoint.h) share, so both
// write the same shard files and the same manifest, and commit alike. For
// the checkpoint package's save paths; trainers call those.
#ifndef ZEROSHARD_CHECKPOINT_SAVE_STEPS_H_
#define ZEROSHARD_CHECKPOINT_SAVE_STEPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/engine_checkpoint.h"
#include "comm/communicator.h"
#include "engine/engine.h"
#include "engine/state_view.h"
#include "proto/checkpoint.pb.h"
#include "sharding/flat_param_layout.h"

namespace zeroshard {

// Unit u's layout as checkpoints store it: over all dp ranks (under hybrid
// sharding the engine's is over the shard group).
FlatParamLayout CheckpointLayout(const Engine& engine, int u);
// Every unit's, and the units this rank's shard file holds (those its
// pipeline stage computes).
std::vector<FlatParamLayout> EngineLayouts(const Engine& engine);
std::vector<FlatParamLayout> SavedLayouts(const Engine& engine);

// Unit u's region of checkpoint kind `kind` through the state view; not
// present for the optimizer state of a unit that has none (frozen).
StateRegion RegionOf(const EngineStateView& view, int u, absl::string_view kind);

// Collective over dp: agrees on `local` sharing the failing rank's error;
// a failure removes the temporary directory (AbandonSave) and says the step
// was not saved.
absl::Status AgreeOnSavePhase(Communicator& dp, const std::string& tmp_dir, int64_t step, absl::string_view what,
                              const absl::Status& local);

// After a save phase failed (agreed): rank 0 removes tmp_dir and the ranks
// agree once more so none returns before it is gone. Returns `error` with
// "; step N was not saved" (and a failed removal) appended.
absl::Status AbandonSave(Communicator& dp, const std::string& tmp_dir, int64_t step, const absl::Status& error);

// Collective: rank 0's nonce is shared, rank 0 creates root and
// <root>/.tmp_step_<step>_<nonce>/; returns that directory on every rank.
absl::StatusOr<std::string> CreateSaveDirectory(Communicator& dp, const std::string& root, int64_t step);

// Rank 0's manifest of a save of `step` as of the engine's state now,
// everything but the file records.
CheckpointManifest ManifestWithoutFiles(const Engine& engine, int64_t step, const CheckpointRunConfig& run,
                                        const DataPosition& data, const SaveOptions& options);

// Collective over dp, after every rank's shard file is written into tmp_dir
// (`mine` its record): the records are gathered, rank 0 adds them to
// `manifest`, writes it, calls options.fault_hook("before_commit") and
// commits the directory (CommitStepDirectory), then prunes to keep_last.
absl::Status CommitShardFiles(Communicator& dp, const std::string& root, const std::string& tmp_dir, int64_t step,
                              CheckpointManifest manifest, const CheckpointFile& mine, const SaveOptions& options);

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_SAVE_STEPS_H_
