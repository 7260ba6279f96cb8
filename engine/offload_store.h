// OffloadStore: the NVMe tier of one rank's optimizer state and master
// weights (docs/offload_streaming.md). It owns the AsyncIo, one anonymous
// preallocated file per streamed class ("rank R master_weights", "rank R
// optimizer_state"), the pool of staging slots and the tickets of the
// chunks in flight, and runs the step program's LOAD / WAIT_LOAD / STORE /
// WAIT_STORE (engine/step_program.h) over the program's chunk table.
//
// Files: each (optimizer region, streamed buffer) owns AlignIo(numel x 4)
// bytes at an AlignIo-aligned offset, regions in order, the optimizer
// state's kinds within a region in order. A fresh file reads as zeros (its
// preallocation), which is the optimizer state's initial value.
//
// Slots: buffer_count AlignedBuffers of buffer_bytes (kOffloadStaging).
// A slot holds one chunk of every streamed buffer at once: the master's
// chunk_elements f32 first (when streamed), then each state kind's, each
// piece 4096-aligned (chunk_elements is a multiple of 1024), and last the
// gradient shard's piece when the grads stream.
//
// Grads ("rank R grads", stages 2-3): WAIT_REDUCE lands each bucket's
// reduced shards in one of two grad staging buffers (BeginGradStaging) and
// writes them to the file (StoreGrads) once the reduction has landed (under
// hybrid sharding at the next WAIT_REDUCE, after the replica all-reduce);
// the buffer is reused two buckets later, after its writes are waited. A
// pipeline's TIED_REDUCE reads a tied unit's shard back into one, sums it
// over the embedding group and stores it again. A LOAD reads the grads piece only
// once the step's reductions are all stored (EndReductions; else WAIT_LOAD
// issues it), so a load placed in the backward never reads a partial sum. STORE
// writes the piece back (unscaled and clipped by the UPDATE), so the file
// holds what a resident shard holds at rest.
//
// Errors: an I/O error inside a step does not end the action that meets
// it: it is kept (status()), nothing more is issued, the optimizer phase
// skips the updates of the step, and SCALER_UPDATE agrees on it over the
// control communicator, so every rank fails the step with it and none is
// left in a collective. Drain, ReadRange and WriteRange return it too.
//
// Thread-compatible: driven by the engine's thread.
#ifndef ZEROSHARD_ENGINE_OFFLOAD_STORE_H_
#define ZEROSHARD_ENGINE_OFFLOAD_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/memory_tracker.h"
#include "engine/engine_options.h"
#include "engine/step_program.h"
#include "offload/async_io.h"

namespace zeroshard {

struct OffloadStoreOptions {
  OffloadOptions offload;  // nvme_dir, buffer_count, buffer_bytes, queue_depth
  bool master = false;     // the f32 master weights stream
  int state_kinds = 0;     // the optimizer's f32 state kinds that stream (0: none)
  bool grads = false;      // the f32 gradient shards stream (stages 2-3)
  // Bytes of each of the two grad staging buffers: the largest bucket's
  // shards, each rounded up with AlignIo.
  int64_t grad_staging_bytes = 0;
  int rank = 0;            // for the files' labels
  // By optimizer region: its elements.
  std::vector<int64_t> region_numel;
  // The train program's chunks and, for each, its unit's optimizer region.
  std::vector<OffloadChunk> chunks;
  std::vector<int> chunk_region;
  int64_t chunk_elements = 0;
};

// Per-step I/O, as StepResult reports it.
struct OffloadIoDelta {
  int64_t read_bytes = 0;
  int64_t write_bytes = 0;
  double busy_seconds = 0;
};

// What `now` adds to `*taken` (the stats last taken), which becomes `now`.
OffloadIoDelta TakeIoDelta(const IoStats& now, IoStats* taken);

class OffloadStore {
 public:
  static constexpr int kGradsKind = -2;  // ReadRange / WriteRange: the gradient shard
  // Opens the files (kFailedPrecondition naming a missing or read-only
  // directory, kResourceExhausted when the space is not there) and
  // allocates the slots.
  static absl::StatusOr<std::unique_ptr<OffloadStore>> Create(OffloadStoreOptions options, MemoryTracker* tracker);
  ~OffloadStore();

  bool streams_master() const { return options_.master; }
  bool streams_state() const { return options_.state_kinds > 0; }
  bool streams_grads() const { return options_.grads; }
  int64_t chunk_elements() const { return options_.chunk_elements; }

  // The slot's piece of the master, and of state kind `kind`.
  float* slot_master(int slot);
  float* slot_state(int slot, int kind);
  float* slot_grads(int slot);

  // Grads: the next grad staging buffer (after waiting its earlier writes),
  // where the bucket's units' shards go at AlignIo-rounded offsets; then
  // StoreGrads(region, shard) writes one region's shard from either
  // buffer (waited for when that buffer is begun again). Never
  // fail: an error is kept in status().
  char* BeginGradStaging();
  void StoreGrads(int region, const float* shard);
  // Whether region `region`'s shard was stored in this step, and (for a
  // later reduction into it: accumulation) reads it back into `shard`, in
  // the current grad staging buffer, waiting for the read.
  bool grads_stored(int region) const { return grads_stored_[region]; }
  void LoadGrads(int region, float* shard);
  // Every reduction of the step is stored (the optimizer phase begins).
  void EndReductions() { reductions_done_ = true; }
  // The step is over: no region's gradients are stored for the next one.
  void EndGradStep();

  // The step program's actions on chunk `chunk` (its slot is the table's).
  // Never fail: an error is kept in status(). A LOAD into a slot whose
  // STORE is still in flight does not wait: its reads are queued behind
  // that store's writes and submitted when they complete; WAIT_LOAD waits
  // both.
  void Load(int chunk);
  void WaitLoad(int chunk);
  void Store(int chunk);
  // Nothing when the chunk has no store in flight.
  void WaitStore(int chunk);
  const absl::Status& status() const { return status_; }

  // Waits for every request in flight; status().
  absl::Status Drain();

  // Elements [offset, offset + count) of region `region`'s master
  // (kind -1), gradient shard (kGradsKind) or state kind `kind`, to or from host memory, through a
  // bounce buffer of one chunk (never a whole region). Drains first.
  absl::Status ReadRange(int region, int kind, int64_t offset, int64_t count, void* out);
  absl::Status WriteRange(int region, int kind, int64_t offset, int64_t count, const void* in);

  // The I/O since the last call.
  OffloadIoDelta TakeIo();

  // For fault tests and diagnostics: the files (-1 when the class does not
  // stream) and the I/O.
  int master_file() const { return master_file_; }
  int state_file() const { return state_file_; }
  int grads_file() const { return grads_file_; }
  AsyncIo& io() { return *io_; }

 private:
  OffloadStore() = default;
  // The file and byte offset of region `region`'s buffer `kind` (-1: master).
  int FileOf(int kind) const {
    return kind == kGradsKind ? grads_file_ : kind < 0 ? master_file_ : state_file_;
  }
  int64_t OffsetOf(int region, int kind) const;
  // Every streamed buffer of chunk `chunk`: (file, offset, slot piece, bytes).
  struct Piece {
    int file;
    int64_t offset;
    char* slot;
    int64_t bytes;
  };
  std::vector<Piece> Pieces(int chunk);
  Piece GradsPiece(int chunk);
  void IssueGradsLoad(int chunk);
  // Queues the reads (LOAD) or writes (STORE) of every piece of `chunk`.
  void Issue(int chunk, bool write);
  void Fail(const absl::Status& s, const std::string& what);
  absl::Status WaitTickets(std::vector<IoTicket>* tickets);
  absl::Status EnsureBounce();

  OffloadStoreOptions options_;
  MemoryTracker* tracker_ = nullptr;
  std::vector<AlignedBuffer> slots_;
  AlignedBuffer bounce_;
  // Declared after the buffers: destroyed first, waiting for the kernel to
  // finish with them.
  std::unique_ptr<AsyncIo> io_;
  int master_file_ = -1;
  int state_file_ = -1;
  int grads_file_ = -1;
  std::vector<int64_t> grads_offset_;              // by region
  std::vector<bool> grads_stored_;                 // by region: written this step
  bool reductions_done_ = false;                   // EndReductions in this step
  std::vector<bool> grads_loading_;                // by chunk: its grads piece is issued
  AlignedBuffer grad_staging_[2];
  std::vector<IoTicket> grad_writes_[2];           // by staging buffer, in flight
  int grad_staging_next_ = 0;
  std::vector<int64_t> master_offset_;             // by region
  std::vector<std::vector<int64_t>> state_offset_;  // [region][kind]
  std::vector<std::vector<IoTicket>> loads_;        // by chunk, in flight
  std::vector<std::vector<IoTicket>> stores_;       // by chunk, in flight
  std::vector<int> slot_store_;                     // by slot: the chunk whose store is not waited, -1
  absl::Status status_;
  IoStats taken_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_OFFLOAD_STORE_H_
