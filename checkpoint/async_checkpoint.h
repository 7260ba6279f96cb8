// Asynchronous checkpoints (engine.checkpoint.async_save; docs/resilience.md,
// "Asynchronous saves"): the save leaves the critical path. At the step
// boundary where a save is due each rank copies what its shard file holds
// into a host snapshot it owns (TakeCheckpointSnapshot, collective); a
// writer thread writes and checksums the file from the snapshot while
// training continues; at a later boundary the ranks agree that every write
// finished and rank 0 commits (CommitCheckpointSnapshot, collective). The
// files and the manifest are those SaveCheckpoint writes for that step,
// byte for byte (checkpoint/save_steps.h).
//
// Trainer use (examples/gpt2_trainer.cc):
//   AsyncCheckpointer async(SaveOptionsFromConfig(engine_config));
//   per step boundary, in one agreement with the others' bits:
//     if (async.in_flight() && every rank's async.written()) async.Finish(engine);
//   at a due step: if (async.in_flight()) async.Finish(engine); async.Begin(engine, ...);
//   at the end: async.Finish(engine).
#ifndef ZEROSHARD_CHECKPOINT_ASYNC_CHECKPOINT_H_
#define ZEROSHARD_CHECKPOINT_ASYNC_CHECKPOINT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/background_writer.h"
#include "checkpoint/engine_checkpoint.h"
#include "core/device.h"
#include "engine/engine.h"
#include "proto/checkpoint.pb.h"
#include "sharding/flat_param_layout.h"

namespace zeroshard {

// One rank's copy of a step's checkpointed state: for each unit its shard
// file holds (in file order, units with parameters) and each kind, the
// rank's S f32 values (a frozen unit's optimizer state as zeros). Host
// memory, pinned on GPU builds. Does not change after it is taken.
struct CheckpointSnapshot {
  std::string root;
  std::string tmp_dir;  // <root>/.tmp_step_<step>_<nonce>/, created
  int64_t step = 0;
  int pp_rank = 0, dp_rank = 0, tp_rank = 0;
  std::vector<FlatParamLayout> layouts;  // the units this rank saves
  std::vector<std::string> kinds;        // "master" first
  // values[slot * kinds.size() + k]; slot_of_unit[u] is unit u's slot (-1:
  // not in this file).
  std::vector<PinnedHostBuffer> values;
  std::vector<int> slot_of_unit;
  CheckpointManifest manifest;  // rank 0: as of the snapshot, without the file records
  // Bytes held in `values`: what MemoryPlan::checkpoint_snapshot_bytes plans.
  int64_t bytes() const;
};

// Collective over engine.control(): creates the step's temporary
// directory, copies this rank's slices into host memory (through the state
// view: from a GPU, or from the NVMe tier's files) and, on rank 0, records
// the manifest as of now. Training may change the engine right after. A
// failure on any rank is returned on every rank and removes the directory.
// `recycled` (may be null) holds an earlier snapshot's buffers: they are
// taken over, in order, while their sizes match, so that a run's saves after
// the first touch no fresh memory.
absl::StatusOr<std::unique_ptr<CheckpointSnapshot>> TakeCheckpointSnapshot(
    Engine& engine, const std::string& root, int64_t step, const CheckpointRunConfig& run, const DataPosition& data,
    const SaveOptions& options, std::vector<PinnedHostBuffer>* recycled = nullptr);

// Not collective (the writer thread's job): writes and fsyncs the snapshot's
// shard file into its temporary directory and returns its record (sizes,
// checksums). Calls options.async_write_fault first; errors name the file.
absl::StatusOr<CheckpointFile> WriteCheckpointSnapshot(const CheckpointSnapshot& snapshot, const SaveOptions& options);

// Collective over engine.control(): agrees on every rank's `written`. A
// failure on any rank comes back on every rank as "writing a shard file
// failed on dp rank R: <file>: <cause>; step N was not saved", with the
// temporary directory removed and `latest` untouched. Otherwise rank 0
// writes the manifest and commits as SaveCheckpoint does, then prunes.
absl::Status CommitCheckpointSnapshot(Engine& engine, const CheckpointSnapshot& snapshot,
                                      const absl::StatusOr<CheckpointFile>& written, const SaveOptions& options);

// At most one asynchronous save in flight, its snapshot and its writer
// thread. Every rank calls Begin and Finish at the same steps.
class AsyncCheckpointer {
 public:
  static constexpr int kWriterNice = 10;
  explicit AsyncCheckpointer(SaveOptions options) : options_(std::move(options)) {}
  // Waits for a running write; a save not finished is left as its
  // temporary directory, which the next save's pruning removes.
  ~AsyncCheckpointer() = default;
  AsyncCheckpointer(const AsyncCheckpointer&) = delete;
  AsyncCheckpointer& operator=(const AsyncCheckpointer&) = delete;

  // Collective: snapshots `step` and starts its write. kFailedPrecondition
  // when a save is in flight (Finish it first).
  absl::Status Begin(Engine& engine, const std::string& root, int64_t step, const CheckpointRunConfig& run,
                     const DataPosition& data);
  bool in_flight() const { return snapshot_ != nullptr; }
  // The in-flight save's step (-1: none).
  int64_t in_flight_step() const { return snapshot_ ? snapshot_->step : -1; }
  // This rank's write of the in-flight save has returned, either way
  // (Finish will not wait for it here); false when none is in flight.
  bool written() const { return writer_.done(); }
  // Collective: waits for this rank's write, agrees on every rank's and
  // commits (CommitCheckpointSnapshot). The snapshot's buffers stay held for
  // the next Begin (a run with async_save plans them for its whole length).
  // Returns the committed step. kFailedPrecondition when none is in flight.
  absl::StatusOr<int64_t> Finish(Engine& engine);
  // Host bytes the snapshot buffers hold now (in flight or kept for the next
  // save), and the most held at once.
  int64_t snapshot_bytes() const;
  int64_t peak_snapshot_bytes() const { return peak_bytes_; }

 private:
  const SaveOptions options_;
  std::unique_ptr<CheckpointSnapshot> snapshot_;
  std::vector<PinnedHostBuffer> recycled_;  // the last committed snapshot's
  int64_t peak_bytes_ = 0;
  // After snapshot_: joined before the snapshot goes. Niced so that the
  // ranks' compute threads go first when the host's cores are busy.
  BackgroundWriter writer_{kWriterNice};
};

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_ASYNC_CHECKPOINT_H_
