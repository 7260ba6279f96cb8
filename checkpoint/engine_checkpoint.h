// Saving and loading an Engine's training state as a sharded checkpoint
// (docs/checkpoint_format.md). Every function here is collective over the
// engine's dp group (its control communicator): every rank calls it with the same arguments, and
// every rank returns the same status code (a rank that did not fail itself
// reports which rank did). The directory must be on a file system every
// rank sees.
//
// What is saved per rank: its slice [r*S, (r+1)*S) of each unit's f32
// master weights and optimizer state (the state kinds the optimizer's
// plug-in declares: AdamW m and v, SGD momentum, Lion's momentum),
// whatever the ZeRO stage; rank 0 adds the manifest (layout, config, step,
// optimizer step count, the engine's loss-scaler state, seed, data
// position). Compute parameters (f32, bf16 or f16) are not saved: loading
// publishes them from the master weights, which rounds them exactly as
// training does, and restores the loss scaler (unless weights_only).
//
// Typical trainer use (`run` from MakeRunRecord, checkpoint/run_record.h):
//   if (resume) ASSIGN_OR_RETURN(LoadedCheckpoint ck, LoadCheckpoint(*engine, root));  // start at ck.step
//   for (step = ck.step; step < steps; ++step) {
//     engine->TrainStep(...);
//     if (CheckpointDue(engine_config, steps, step + 1))
//       RETURN_IF_ERROR(SaveCheckpoint(*engine, root, step + 1, run, {(step + 1) * batch, shuffle_seed},
//                                      SaveOptionsFromConfig(engine_config)));
//   }
#ifndef ZEROSHARD_CHECKPOINT_ENGINE_CHECKPOINT_H_
#define ZEROSHARD_CHECKPOINT_ENGINE_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/engine.h"
#include "sharding/sharded_optimizer.h"
#include "proto/checkpoint.pb.h"
#include "proto/engine_config.pb.h"

namespace zeroshard {

// Where the data stream stands, so a resumed run reads the same sequences.
struct DataPosition {
  int64_t sequences_consumed = 0;  // global sequences consumed so far
  uint64_t shuffle_seed = 0;       // data order seed (BatchPlan::shuffle_seed)
};

struct SaveOptions {
  // After committing, delete all but the newest keep_last steps (0: keep all).
  int keep_last = 0;
  // Loss-scaler state to record. Empty (the default): the engine's own
  // scaler's state when it has one (f16 compute), else nothing.
  CheckpointLossScaler loss_scaler;
  // Test-only: called on every rank at "before_shard_file",
  // "after_shard_file" and, on rank 0, "before_commit" (the manifest is
  // written, the directory not yet renamed). A test kills the process here.
  std::function<void(absl::string_view phase)> fault_hook;
  // Test-only: called by an asynchronous save's writer thread
  // (checkpoint/async_checkpoint.h) before it writes the shard file of
  // `step`; an error fails that write as an I/O error would.
  std::function<absl::Status(int64_t step)> async_write_fault;
};

// Whether a trainer saves after completing `step` (1-based) under
// engine.checkpoint: a directory is set and the step is a multiple of
// `interval` (> 0) or the last one (`total_steps`, the run's length).
bool CheckpointDue(const EngineConfig& engine, int64_t total_steps, int64_t step);

// SaveOptions with keep_last from engine.checkpoint().
SaveOptions SaveOptionsFromConfig(const EngineConfig& engine);

// Writes <root>/step_<step> atomically: every rank writes its shard file
// into <root>/.tmp_step_<step>_<nonce>/ and fsyncs it; after all ranks
// succeeded, rank 0 writes the manifest, renames the directory to
// step_<step> (replacing an existing one) and then points <root>/latest at
// it; then prunes to keep_last. Returns after every rank saw the commit. A
// failure or a killed rank leaves the previous steps and `latest` as they
// were; after a failure every rank returns the failing rank's code and
// message ("writing a shard file failed on dp rank 2: cannot write ...: No
// space left on device; step 4 was not saved") once the temporary directory
// is removed. Saving reads the engine's state only: training results are
// unchanged. `step` is the trainer's iteration count (engine.step() counts
// optimizer updates, which differs after skipped steps; both are saved).
// `run` is what the manifest records of the run (its `config`).
absl::Status SaveCheckpoint(Engine& engine, const std::string& root, int64_t step, const CheckpointRunConfig& run,
                            const DataPosition& data, const SaveOptions& options = SaveOptions());

struct LoadOptions {
  // Load master weights only (--init_from): optimizer state and the step
  // counter stay as they are, and the checkpoint may lack optimizer state.
  bool weights_only = false;
};

struct LoadedCheckpoint {
  std::string dir;               // the step directory read
  // On control rank 0, given a root whose `latest` fails verification: the
  // steps passed over with their problems and the one read
  // (ResumePoint::FallbackWarning); empty otherwise.
  std::string fallback_warning;
  int64_t step = 0;              // the trainer's step to continue from
  int64_t optimizer_steps = 0;   // restored into the engine (unless weights_only)
  int saved_dp = 0;              // dp of the saving job; != engine dp means resharded
  int saved_pp = 1;              // its pipeline stages (units are read wherever they were)
  int saved_tp = 1;              // its tensor-parallel size (any: slices are re-cut from whole tensors)
  CheckpointRunConfig config;    // the saving run (engine section, model, whole config)
  DataPosition data;
  CheckpointLossScaler loss_scaler;   // as saved (fields unset without a scaler)
  uint64_t seed = 0;
};

// Loads `dir_or_root` (a step directory, or a root: the step `latest`
// names when it verifies, else the newest earlier one that verifies,
// FindResumeCheckpoint in checkpoint/retention.h) into the engine, saved at
// any (dp, tp, pp): each rank reads the ranges of the saved shard files that cover its own region of each unit
// (checksums checked) — at the saving tp with the same slices, its own tp
// coordinate's files; otherwise whole tensors, cut to its slice — then
// parameters are published from the master weights. Errors, with the same
// code on every rank (the rank at fault says what, the others name that
// rank): kNotFound (no checkpoint, or a shard file missing), kDataLoss (a
// corrupt file, naming it and the tensor), kUnimplemented (unknown format
// version), kFailedPrecondition (a model whose units or parameters differ
// from the manifest's, naming the first difference; missing optimizer
// state; unless weights_only, a checkpoint of another optimizer or other
// optimizer state kinds, naming both).
// After an error the engine's state is unspecified; do not train on it.
absl::StatusOr<LoadedCheckpoint> LoadCheckpoint(Engine& engine, const std::string& dir_or_root,
                                                const LoadOptions& options = LoadOptions());

// Sets the engine's master weights (and published parameters) from a full
// model in safetensors layout with the engine's parameter names and shapes
// (F32, BF16 or F16; e.g. `zeroshard ckpt consolidate` output). Tensors the
// model does not have are an error, except names starting with "optimizer."
// and those the model lists in Model::ignored_import_tensors (names a model
// declares but does not store, e.g. a tied head's copy), which are
// skipped. Optimizer state and the step counter are untouched.
absl::Status ImportSafetensors(Engine& engine, const std::string& path);

// The optimizer-state kinds an engine's optimizer keeps, "master" first.
std::vector<std::string> CheckpointKinds(const OptimizerOptions& options);

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_ENGINE_CHECKPOINT_H_
