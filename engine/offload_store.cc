#include "engine/offload_store.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zeroshard {
namespace {

// Elements per kIoAlignment of f32.
constexpr int64_t kAlignedElements = kIoAlignment / 4;

int64_t AlignElements(int64_t n) { return (n + kAlignedElements - 1) / kAlignedElements * kAlignedElements; }

}  // namespace

absl::StatusOr<std::unique_ptr<OffloadStore>> OffloadStore::Create(OffloadStoreOptions options,
                                                                   MemoryTracker* tracker) {
  const int buffers = (options.master ? 1 : 0) + options.state_kinds + (options.grads ? 1 : 0);
  if (options.chunk_elements <= 0 || options.chunk_elements % kAlignedElements != 0 ||
      options.chunk_elements * 4 * buffers > options.offload.buffer_bytes || options.offload.buffer_count < 1) {
    return absl::InvalidArgumentError(absl::StrCat("offload store: chunks of ", options.chunk_elements,
                                                   " elements x ", buffers, " buffers do not fit ",
                                                   options.offload.buffer_count, " slots of ",
                                                   options.offload.buffer_bytes, " bytes"));
  }
  if (options.grads && (options.grad_staging_bytes <= 0 || options.grad_staging_bytes % kIoAlignment != 0)) {
    return absl::InvalidArgumentError(absl::StrCat("offload store: grad staging of ", options.grad_staging_bytes,
                                                   " bytes, expected a positive multiple of ", kIoAlignment));
  }
  if (options.chunks.size() != options.chunk_region.size()) {
    return absl::InternalError("offload store: a region for every chunk expected");
  }
  std::unique_ptr<OffloadStore> store(new OffloadStore());
  store->tracker_ = tracker;
  AsyncIoOptions io;
  io.queue_depth = options.offload.queue_depth;
  ASSIGN_OR_RETURN(store->io_, AsyncIo::Create(io));
  const int R = static_cast<int>(options.region_numel.size());
  int64_t master_bytes = 0, state_bytes = 0, grads_bytes = 0;
  store->master_offset_.assign(R, 0);
  store->grads_offset_.assign(R, 0);
  store->grads_stored_.assign(R, false);
  store->state_offset_.assign(R, std::vector<int64_t>(options.state_kinds, 0));
  for (int r = 0; r < R; ++r) {
    const int64_t bytes = AlignIo(options.region_numel[r] * 4);
    store->master_offset_[r] = master_bytes;
    master_bytes += bytes;
    store->grads_offset_[r] = grads_bytes;
    grads_bytes += bytes;
    for (int k = 0; k < options.state_kinds; ++k) {
      store->state_offset_[r][k] = state_bytes;
      state_bytes += bytes;
    }
  }
  const std::string& dir = options.offload.nvme_dir;
  if (options.master) {
    ASSIGN_OR_RETURN(store->master_file_,
                     store->io_->OpenFile(dir, absl::StrCat("rank ", options.rank, " master_weights"),
                                          std::max<int64_t>(master_bytes, kIoAlignment)));
  }
  if (options.state_kinds > 0) {
    ASSIGN_OR_RETURN(store->state_file_,
                     store->io_->OpenFile(dir, absl::StrCat("rank ", options.rank, " optimizer_state"),
                                          std::max<int64_t>(state_bytes, kIoAlignment)));
  }
  if (options.grads) {
    ASSIGN_OR_RETURN(store->grads_file_,
                     store->io_->OpenFile(dir, absl::StrCat("rank ", options.rank, " grads"),
                                          std::max<int64_t>(grads_bytes, kIoAlignment)));
    for (AlignedBuffer& b : store->grad_staging_) {
      ASSIGN_OR_RETURN(b, AlignedBuffer::Allocate(options.grad_staging_bytes, tracker,
                                                  MemoryCategory::kOffloadStaging));
    }
  }
  for (int s = 0; s < options.offload.buffer_count; ++s) {
    ASSIGN_OR_RETURN(AlignedBuffer slot,
                     AlignedBuffer::Allocate(options.offload.buffer_bytes, tracker, MemoryCategory::kOffloadStaging));
    store->slots_.push_back(std::move(slot));
  }
  store->loads_.resize(options.chunks.size());
  store->stores_.resize(options.chunks.size());
  store->grads_loading_.assign(options.chunks.size(), false);
  store->slot_store_.assign(options.offload.buffer_count, -1);
  store->options_ = std::move(options);
  store->taken_ = store->io_->stats();
  return store;
}

OffloadStore::~OffloadStore() {
  if (io_ != nullptr) Drain().IgnoreError();
}

float* OffloadStore::slot_master(int slot) { return static_cast<float*>(slots_[slot].data()); }

float* OffloadStore::slot_state(int slot, int kind) {
  const int index = (options_.master ? 1 : 0) + kind;
  return static_cast<float*>(slots_[slot].data()) + index * options_.chunk_elements;
}

float* OffloadStore::slot_grads(int slot) {
  const int index = (options_.master ? 1 : 0) + options_.state_kinds;
  return static_cast<float*>(slots_[slot].data()) + index * options_.chunk_elements;
}

char* OffloadStore::BeginGradStaging() {
  const int b = grad_staging_next_;
  grad_staging_next_ = 1 - b;
  Fail(WaitTickets(&grad_writes_[b]), "waiting a grads store");
  return static_cast<char*>(grad_staging_[b].data());
}

void OffloadStore::StoreGrads(int region, const float* shard) {
  grads_stored_[region] = true;
  const int64_t bytes = AlignIo(options_.region_numel[region] * 4);
  if (!status_.ok() || bytes == 0) return;
  // The staging buffer holding the shard (under hybrid sharding a bucket is
  // stored after the next one began staging in the other buffer).
  const char* at = reinterpret_cast<const char*>(shard);
  const char* first = static_cast<const char*>(grad_staging_[0].data());
  const int b = at >= first && at < first + options_.grad_staging_bytes ? 0 : 1;
  absl::StatusOr<IoTicket> t = io_->Write(grads_file_, grads_offset_[region], shard, bytes);
  if (!t.ok()) return Fail(t.status(), absl::StrCat("STORE grads of region ", region));
  grad_writes_[b].push_back(*t);
  io_->Flush();
}

void OffloadStore::LoadGrads(int region, float* shard) {
  const int64_t bytes = AlignIo(options_.region_numel[region] * 4);
  if (!status_.ok() || bytes == 0) return;
  absl::StatusOr<IoTicket> t = io_->Read(grads_file_, grads_offset_[region], shard, bytes);
  if (!t.ok()) return Fail(t.status(), absl::StrCat("LOAD grads of region ", region));
  io_->Flush();
  Fail(io_->Wait(*t), absl::StrCat("LOAD grads of region ", region));
}

void OffloadStore::EndGradStep() {
  grads_stored_.assign(grads_stored_.size(), false);
  reductions_done_ = false;
}

OffloadStore::Piece OffloadStore::GradsPiece(int chunk) {
  const OffloadChunk& c = options_.chunks[chunk];
  const int region = options_.chunk_region[chunk];
  return {grads_file_, grads_offset_[region] + c.begin * 4, reinterpret_cast<char*>(slot_grads(c.slot)),
          AlignIo(c.length * 4)};
}

void OffloadStore::IssueGradsLoad(int chunk) {
  if (!status_.ok() || grads_loading_[chunk]) return;
  grads_loading_[chunk] = true;
  const Piece p = GradsPiece(chunk);
  absl::StatusOr<IoTicket> t = io_->Read(p.file, p.offset, p.slot, p.bytes);
  if (!t.ok()) return Fail(t.status(), absl::StrCat("LOAD grads of chunk ", chunk));
  loads_[chunk].push_back(*t);
  io_->Flush();
}

int64_t OffloadStore::OffsetOf(int region, int kind) const {
  if (kind == kGradsKind) return grads_offset_[region];
  return kind < 0 ? master_offset_[region] : state_offset_[region][kind];
}

std::vector<OffloadStore::Piece> OffloadStore::Pieces(int chunk) {
  const OffloadChunk& c = options_.chunks[chunk];
  const int region = options_.chunk_region[chunk];
  // The chunk's bytes rounded up: the file gives every region its aligned
  // tail, the slot every piece a whole chunk.
  const int64_t bytes = AlignIo(c.length * 4);
  std::vector<Piece> pieces;
  if (options_.master) {
    pieces.push_back({master_file_, OffsetOf(region, -1) + c.begin * 4, reinterpret_cast<char*>(slot_master(c.slot)),
                      bytes});
  }
  for (int k = 0; k < options_.state_kinds; ++k) {
    pieces.push_back({state_file_, OffsetOf(region, k) + c.begin * 4,
                      reinterpret_cast<char*>(slot_state(c.slot, k)), bytes});
  }
  return pieces;
}

void OffloadStore::Fail(const absl::Status& s, const std::string& what) {
  if (s.ok() || !status_.ok()) return;
  status_ = absl::Status(s.code(), absl::StrCat("offload I/O (", what, "): ", s.message()));
}

void OffloadStore::Issue(int chunk, bool write) {
  if (!status_.ok()) return;
  std::vector<IoTicket>& tickets = write ? stores_[chunk] : loads_[chunk];
  std::vector<Piece> pieces = Pieces(chunk);
  if (write && options_.grads) pieces.push_back(GradsPiece(chunk));
  for (const Piece& p : pieces) {
    absl::StatusOr<IoTicket> t = write ? io_->Write(p.file, p.offset, p.slot, p.bytes)
                                       : io_->Read(p.file, p.offset, p.slot, p.bytes);
    if (!t.ok()) return Fail(t.status(), absl::StrCat(write ? "STORE" : "LOAD", " chunk ", chunk));
    tickets.push_back(*t);
  }
  io_->Flush();
}

void OffloadStore::Load(int chunk) {
  Issue(chunk, /*write=*/false);
  grads_loading_[chunk] = false;
  if (options_.grads && reductions_done_) IssueGradsLoad(chunk);
}

absl::Status OffloadStore::WaitTickets(std::vector<IoTicket>* tickets) {
  absl::Status first;
  for (IoTicket t : *tickets) {
    absl::Status s = io_->Wait(t);
    if (first.ok()) first = s;
  }
  tickets->clear();
  return first;
}

void OffloadStore::WaitLoad(int chunk) {
  // A load placed before the reduction: the grads piece is read now.
  if (options_.grads && !grads_loading_[chunk]) IssueGradsLoad(chunk);
  // The slot's previous store: the load's reads were queued behind it
  // (AsyncIo orders a read into a buffer after the write sending it), so
  // it has completed once they have; waiting it collects its error.
  const int slot = options_.chunks[chunk].slot;
  const int stored = slot_store_[slot];
  if (stored >= 0) {
    Fail(WaitTickets(&stores_[stored]), absl::StrCat("WAIT_LOAD chunk ", chunk, ": the STORE of chunk ", stored));
    slot_store_[slot] = -1;
  }
  absl::Status s = WaitTickets(&loads_[chunk]);
  Fail(s, absl::StrCat("WAIT_LOAD chunk ", chunk));
}

void OffloadStore::Store(int chunk) {
  Issue(chunk, /*write=*/true);
  slot_store_[options_.chunks[chunk].slot] = chunk;
}

void OffloadStore::WaitStore(int chunk) {
  absl::Status s = WaitTickets(&stores_[chunk]);
  Fail(s, absl::StrCat("WAIT_STORE chunk ", chunk));
  int& stored = slot_store_[options_.chunks[chunk].slot];
  if (stored == chunk) stored = -1;
}

absl::Status OffloadStore::Drain() {
  for (size_t c = 0; c < loads_.size(); ++c) {
    Fail(WaitTickets(&loads_[c]), absl::StrCat("draining the load of chunk ", c));
    Fail(WaitTickets(&stores_[c]), absl::StrCat("draining the store of chunk ", c));
  }
  for (std::vector<IoTicket>& writes : grad_writes_) Fail(WaitTickets(&writes), "draining a grads store");
  slot_store_.assign(slot_store_.size(), -1);
  return status_;
}

absl::Status OffloadStore::EnsureBounce() {
  if (bounce_.data() != nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(bounce_,
                   AlignedBuffer::Allocate(options_.chunk_elements * 4, tracker_, MemoryCategory::kOffloadStaging));
  return absl::OkStatus();
}

absl::Status OffloadStore::ReadRange(int region, int kind, int64_t offset, int64_t count, void* out) {
  RETURN_IF_ERROR(Drain());
  if (count == 0) return absl::OkStatus();
  RETURN_IF_ERROR(EnsureBounce());
  const int64_t n = options_.chunk_elements;
  const int64_t end = offset + count;
  const int64_t limit = AlignElements(options_.region_numel[region]);
  for (int64_t w0 = offset / kAlignedElements * kAlignedElements; w0 < end; w0 += n) {
    const int64_t w1 = std::min({w0 + n, AlignElements(end), limit});
    ASSIGN_OR_RETURN(IoTicket t, io_->Read(FileOf(kind), OffsetOf(region, kind) + w0 * 4, bounce_.data(), (w1 - w0) * 4));
    RETURN_IF_ERROR(io_->Wait(t));
    const int64_t lo = std::max(w0, offset), hi = std::min(w1, end);
    std::memcpy(static_cast<char*>(out) + (lo - offset) * 4, static_cast<const char*>(bounce_.data()) + (lo - w0) * 4,
                (hi - lo) * 4);
  }
  return absl::OkStatus();
}

absl::Status OffloadStore::WriteRange(int region, int kind, int64_t offset, int64_t count, const void* in) {
  RETURN_IF_ERROR(Drain());
  if (count == 0) return absl::OkStatus();
  RETURN_IF_ERROR(EnsureBounce());
  const int64_t n = options_.chunk_elements;
  const int64_t end = offset + count;
  const int64_t limit = AlignElements(options_.region_numel[region]);
  for (int64_t w0 = offset / kAlignedElements * kAlignedElements; w0 < end; w0 += n) {
    const int64_t w1 = std::min({w0 + n, AlignElements(end), limit});
    const int64_t lo = std::max(w0, offset), hi = std::min(w1, end);
    const int64_t at = OffsetOf(region, kind) + w0 * 4;
    if (lo > w0 || hi < w1) {  // a partial window: read what it keeps
      ASSIGN_OR_RETURN(IoTicket t, io_->Read(FileOf(kind), at, bounce_.data(), (w1 - w0) * 4));
      RETURN_IF_ERROR(io_->Wait(t));
    }
    std::memcpy(static_cast<char*>(bounce_.data()) + (lo - w0) * 4, static_cast<const char*>(in) + (lo - offset) * 4,
                (hi - lo) * 4);
    ASSIGN_OR_RETURN(IoTicket t, io_->Write(FileOf(kind), at, bounce_.data(), (w1 - w0) * 4));
    RETURN_IF_ERROR(io_->Wait(t));
  }
  return absl::OkStatus();
}

OffloadIoDelta TakeIoDelta(const IoStats& now, IoStats* taken) {
  OffloadIoDelta d;
  d.read_bytes = now.read_bytes - taken->read_bytes;
  d.write_bytes = now.write_bytes - taken->write_bytes;
  d.busy_seconds = now.busy_seconds - taken->busy_seconds;
  *taken = now;
  return d;
}

OffloadIoDelta OffloadStore::TakeIo() {
  return TakeIoDelta(io_->stats(), &taken_);
}

}  // namespace zeroshard
