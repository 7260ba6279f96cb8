#include "engine/param_shard_store.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zeroshard {

absl::StatusOr<std::unique_ptr<ParamShardStore>> ParamShardStore::Create(ParamShardStoreOptions options,
                                                                        MemoryTracker* tracker) {
  if (options.slots < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("param shard store: ", options.slots, " param slots, expected at least 1"));
  }
  std::unique_ptr<ParamShardStore> store(new ParamShardStore());
  AsyncIoOptions io;
  io.queue_depth = options.offload.queue_depth;
  ASSIGN_OR_RETURN(store->io_, AsyncIo::Create(io));
  int64_t file_bytes = 0, largest = 0;
  for (int64_t bytes : options.shard_bytes) {
    store->offset_.push_back(file_bytes);
    file_bytes += AlignIo(bytes);
    largest = std::max(largest, AlignIo(bytes));
  }
  ASSIGN_OR_RETURN(store->file_, store->io_->OpenFile(options.offload.nvme_dir, absl::StrCat("rank ", options.rank, " params"),
                                                      std::max<int64_t>(file_bytes, kIoAlignment)));
  for (int s = 0; s < options.slots; ++s) {
    ASSIGN_OR_RETURN(AlignedBuffer slot, AlignedBuffer::Allocate(std::max<int64_t>(largest, kIoAlignment), tracker,
                                                                 MemoryCategory::kOffloadStaging));
    store->slots_.push_back(std::move(slot));
  }
  store->loads_.resize(options.slots);
  store->stores_.resize(options.slots);
  store->options_ = std::move(options);
  store->taken_ = store->io_->stats();
  return store;
}

ParamShardStore::~ParamShardStore() {
  if (io_ != nullptr) Drain().IgnoreError();
}

void ParamShardStore::Fail(const absl::Status& s, const std::string& what) {
  if (s.ok() || !status_.ok()) return;
  status_ = absl::Status(s.code(), absl::StrCat("offload I/O (", what, "): ", s.message()));
}

void ParamShardStore::Issue(int unit, int slot, bool write) {
  if (!status_.ok()) return;
  const std::string what = absl::StrCat(write ? "STORE" : "LOAD", " params of unit ", unit, " param_slot ", slot);
  if (!streams(unit) || slot < 0 || slot >= slots()) {
    return Fail(absl::InternalError("no such streamed unit or param slot"), what);
  }
  const int64_t bytes = AlignIo(options_.shard_bytes[unit]);
  absl::StatusOr<IoTicket> t = write ? io_->Write(file_, offset_[unit], slots_[slot].data(), bytes)
                                     : io_->Read(file_, offset_[unit], slots_[slot].data(), bytes);
  if (!t.ok()) return Fail(t.status(), what);
  (write ? stores_ : loads_)[slot].push_back(*t);
  io_->Flush();
}

absl::Status ParamShardStore::WaitTicket(std::vector<IoTicket>* tickets) {
  absl::Status first;
  for (IoTicket t : *tickets) {
    absl::Status s = io_->Wait(t);
    if (first.ok()) first = s;
  }
  tickets->clear();
  return first;
}

void ParamShardStore::Load(int unit, int slot) { Issue(unit, slot, /*write=*/false); }

void ParamShardStore::WaitLoad(int slot) {
  Fail(WaitTicket(&loads_[slot]), absl::StrCat("WAIT_LOAD params param_slot ", slot));
}

void ParamShardStore::Store(int unit, int slot) { Issue(unit, slot, /*write=*/true); }

void ParamShardStore::WaitStore(int slot) {
  Fail(WaitTicket(&stores_[slot]), absl::StrCat("WAIT_STORE params param_slot ", slot));
}

absl::Status ParamShardStore::Drain() {
  for (int s = 0; s < slots(); ++s) {
    Fail(WaitTicket(&loads_[s]), absl::StrCat("draining the params load of param_slot ", s));
    Fail(WaitTicket(&stores_[s]), absl::StrCat("draining the params store of param_slot ", s));
  }
  return status_;
}

absl::Status ParamShardStore::Transfer(int unit, bool write) {
  const int64_t bytes = AlignIo(options_.shard_bytes[unit]);
  ASSIGN_OR_RETURN(IoTicket t, write ? io_->Write(file_, offset_[unit], slots_[0].data(), bytes)
                                     : io_->Read(file_, offset_[unit], slots_[0].data(), bytes));
  return io_->Wait(t);
}

absl::Status ParamShardStore::Read(int unit, int64_t offset, int64_t bytes, void* out) {
  RETURN_IF_ERROR(Drain());
  if (bytes == 0) return absl::OkStatus();
  if (!streams(unit) || offset < 0 || offset + bytes > options_.shard_bytes[unit]) {
    return absl::OutOfRangeError(absl::StrCat("param shard store: bytes [", offset, ", ", offset + bytes,
                                              ") of unit ", unit, ", whose streamed shard has ",
                                              streams(unit) ? options_.shard_bytes[unit] : 0, " bytes"));
  }
  RETURN_IF_ERROR(Transfer(unit, /*write=*/false));
  std::memcpy(out, static_cast<const char*>(slots_[0].data()) + offset, static_cast<size_t>(bytes));
  return absl::OkStatus();
}

absl::Status ParamShardStore::Write(int unit, int64_t offset, int64_t bytes, const void* in) {
  RETURN_IF_ERROR(Drain());
  if (bytes == 0) return absl::OkStatus();
  if (!streams(unit) || offset < 0 || offset + bytes > options_.shard_bytes[unit]) {
    return absl::OutOfRangeError(absl::StrCat("param shard store: bytes [", offset, ", ", offset + bytes,
                                              ") of unit ", unit, ", whose streamed shard has ",
                                              streams(unit) ? options_.shard_bytes[unit] : 0, " bytes"));
  }
  // A partial write keeps the rest of the shard.
  if (offset > 0 || bytes < options_.shard_bytes[unit]) RETURN_IF_ERROR(Transfer(unit, /*write=*/false));
  char* at = static_cast<char*>(slots_[0].data()) + offset;
  if (at != in) std::memcpy(at, in, static_cast<size_t>(bytes));
  return Transfer(unit, /*write=*/true);
}

OffloadIoDelta ParamShardStore::TakeIo() {
  return TakeIoDelta(io_->stats(), &taken_);
}

}  // namespace zeroshard
