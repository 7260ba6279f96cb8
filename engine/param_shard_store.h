// ParamShardStore: the NVMe tier of one rank's compute-dtype parameter
// shards (engine.offload.params: NVME, ZeRO stage 3;
// docs/offload_streaming.md). It owns an AsyncIo, one anonymous
// preallocated file ("rank R params": each streamed unit's shard at an
// AlignIo-aligned offset, units in order), the pool of param slots (each
// AlignIo of the largest shard, kOffloadStaging) and the tickets in flight,
// and runs the step program's LOAD / WAIT_LOAD / STORE / WAIT_STORE of the
// shards (engine/param_offload_program.h). A slot has at most one transfer
// in flight (the program reuses a slot only after its WAIT_STORE), so
// tickets are kept by slot.
//
// Errors are kept like OffloadStore's (engine/offload_store.h): an I/O
// error inside a step never ends the action that meets it, nothing more is
// issued, and SCALER_UPDATE (or Evaluate) agrees on it across the ranks.
//
// Thread-compatible: driven by the engine's thread.
#ifndef ZEROSHARD_ENGINE_PARAM_SHARD_STORE_H_
#define ZEROSHARD_ENGINE_PARAM_SHARD_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/memory_tracker.h"
#include "engine/engine_options.h"
#include "engine/offload_store.h"
#include "offload/async_io.h"

namespace zeroshard {

struct ParamShardStoreOptions {
  OffloadOptions offload;  // nvme_dir, queue_depth
  int rank = 0;            // for the file's label
  // By unit: the bytes of its compute-dtype shard, 0 when it does not stream.
  std::vector<int64_t> shard_bytes;
  int slots = 1;  // StepProgram::param_slots
};

class ParamShardStore {
 public:
  // Opens the file (kFailedPrecondition naming a missing or read-only
  // directory, kResourceExhausted when the space is not there) and
  // allocates the slots; kInvalidArgument without a slot.
  static absl::StatusOr<std::unique_ptr<ParamShardStore>> Create(ParamShardStoreOptions options,
                                                                  MemoryTracker* tracker);
  ~ParamShardStore();

  bool streams(int unit) const {
    return unit >= 0 && unit < static_cast<int>(offset_.size()) && options_.shard_bytes[unit] > 0;
  }
  int slots() const { return static_cast<int>(slots_.size()); }
  void* slot(int s) { return slots_[s].data(); }

  // The program's actions; never fail: an error is kept in status().
  void Load(int unit, int slot);
  void WaitLoad(int slot);
  void Store(int unit, int slot);
  // Nothing when the slot has no store in flight.
  void WaitStore(int slot);
  const absl::Status& status() const { return status_; }

  // Waits for every request in flight; status().
  absl::Status Drain();

  // Bytes [offset, offset + bytes) of the unit's shard to or from host
  // memory, between steps, through slot 0 (one shard of memory, never a
  // whole class). Drains first. `in` may be slot(0) itself.
  absl::Status Read(int unit, int64_t offset, int64_t bytes, void* out);
  absl::Status Write(int unit, int64_t offset, int64_t bytes, const void* in);

  // The I/O since the last call.
  OffloadIoDelta TakeIo();

  int file() const { return file_; }
  AsyncIo& io() { return *io_; }

 private:
  ParamShardStore() = default;
  void Issue(int unit, int slot, bool write);
  void Fail(const absl::Status& s, const std::string& what);
  absl::Status WaitTicket(std::vector<IoTicket>* tickets);
  // Reads or writes the whole shard of `unit` in slot 0 and waits.
  absl::Status Transfer(int unit, bool write);

  ParamShardStoreOptions options_;
  std::vector<AlignedBuffer> slots_;
  // Declared after the buffers: destroyed first, waiting for the kernel.
  std::unique_ptr<AsyncIo> io_;
  int file_ = -1;
  std::vector<int64_t> offset_;                // by unit
  std::vector<std::vector<IoTicket>> loads_;   // by slot, in flight
  std::vector<std::vector<IoTicket>> stores_;  // by slot, in flight
  absl::Status status_;
  IoStats taken_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_PARAM_SHARD_STORE_H_
