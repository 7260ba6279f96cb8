#include "engine/host_offload.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/cast.h"

namespace zeroshard {

bool UsesHostOffload(const EngineOptions& options) {
  const OffloadOptions& o = options.offload;
  const bool host = o.optimizer_state == OffloadTier::kHost && o.master_weights == OffloadTier::kHost;
  return host && (options.device != Device::kCpu || o.host_update_on_cpu_device);
}

int64_t HostOffloadStagingBytes(int64_t numel, DType compute_dtype) {
  const int64_t params = compute_dtype == DType::kF32 ? 0 : numel * static_cast<int64_t>(DTypeSize(compute_dtype));
  return numel * 4 + params;
}

absl::StatusOr<HostOffload::Pinned> HostOffload::Allocate(MemoryCategory category, int64_t bytes) {
  Pinned p;
  p.category = category;
  if (bytes == 0) return p;
  RETURN_IF_ERROR(tracker_->Reserve(category, bytes));
  absl::StatusOr<PinnedHostBuffer> b = PinnedHostBuffer::Allocate(static_cast<size_t>(bytes));
  if (!b.ok()) {
    tracker_->Freed(category, bytes);
    return b.status();
  }
  p.buffer = std::move(*b);
  std::memset(p.buffer.data(), 0, static_cast<size_t>(bytes));
  return p;
}

absl::StatusOr<std::unique_ptr<HostOffload>> HostOffload::Create(std::vector<int64_t> region_numel, int state_kinds,
                                                                 DType compute_dtype, MemoryTracker* tracker,
                                                                 std::unique_ptr<HostTransfers> transfers) {
  if (transfers == nullptr) return absl::InvalidArgumentError("HostOffload::Create: no transfer queue");
  std::unique_ptr<HostOffload> h(new HostOffload());
  h->tracker_ = tracker;
  h->compute_dtype_ = compute_dtype;
  h->state_kinds_ = state_kinds;
  h->transfers_ = std::move(transfers);
  h->regions_.resize(region_numel.size());
  for (size_t r = 0; r < region_numel.size(); ++r) {
    Region& region = h->regions_[r];
    const int64_t n = region_numel[r];
    region.numel = n;
    ASSIGN_OR_RETURN(region.master, h->Allocate(MemoryCategory::kMasterParams, n * 4));
    for (int k = 0; k < state_kinds; ++k) {
      ASSIGN_OR_RETURN(Pinned s, h->Allocate(MemoryCategory::kOptimizerState, n * 4));
      region.state.push_back(std::move(s));
    }
    ASSIGN_OR_RETURN(region.grads, h->Allocate(MemoryCategory::kOffloadStaging, n * 4));
    if (compute_dtype != DType::kF32) {
      ASSIGN_OR_RETURN(region.params, h->Allocate(MemoryCategory::kOffloadStaging,
                                                  n * static_cast<int64_t>(DTypeSize(compute_dtype))));
    }
  }
  return h;
}

HostOffload::~HostOffload() {
  // No copy may still read or write the buffers freed below.
  if (transfers_ != nullptr) transfers_->Drain().IgnoreError();
  for (Region& r : regions_) {
    std::vector<Pinned*> all = {&r.master, &r.grads, &r.params};
    for (Pinned& s : r.state) all.push_back(&s);
    for (Pinned* p : all) {
      if (!p->buffer.empty()) tracker_->Freed(p->category, static_cast<int64_t>(p->buffer.bytes()));
    }
  }
}

float* HostOffload::master(int region) { return regions_[region].master.buffer.as<float>(); }
float* HostOffload::state(int region, int kind) { return regions_[region].state[kind].buffer.as<float>(); }
float* HostOffload::grads(int region) { return regions_[region].grads.buffer.as<float>(); }

absl::Status HostOffload::FetchGrads(int region, const float* device_grads) {
  Region& r = regions_[region];
  ASSIGN_OR_RETURN(r.grads_ticket,
                   transfers_->ToHost(r.grads.buffer.data(), device_grads, static_cast<size_t>(r.numel) * 4));
  return absl::OkStatus();
}

absl::Status HostOffload::WaitGrads(int region) {
  const Region& r = regions_[region];
  if (r.grads_ticket < 0) {
    return absl::FailedPreconditionError(absl::StrCat("host offload: region ", region,
                                                      "'s gradient was not fetched this step; expected FetchGrads "
                                                      "after its reduction"));
  }
  return transfers_->WaitOnHost(r.grads_ticket);
}

absl::Status HostOffload::PushParams(int region, void* device_params, const kernels::KernelContext& cpu) {
  Region& r = regions_[region];
  const void* src = r.master.buffer.data();
  if (compute_dtype_ != DType::kF32) {
    RETURN_IF_ERROR(kernels::Cast(cpu, r.params.buffer.data(), compute_dtype_, src, DType::kF32, r.numel));
    src = r.params.buffer.data();
  }
  ASSIGN_OR_RETURN(r.params_ticket,
                   transfers_->ToDevice(device_params, src, static_cast<size_t>(r.numel) * DTypeSize(compute_dtype_)));
  return absl::OkStatus();
}

absl::Status HostOffload::OrderParams(int region) {
  const Region& r = regions_[region];
  if (r.params_ticket < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "host offload: region ", region, "'s parameters were not pushed this step; expected PushParams first"));
  }
  return transfers_->OrderCompute(r.params_ticket);
}

absl::Status HostOffload::Drain() {
  RETURN_IF_ERROR(transfers_->Drain());
  for (Region& r : regions_) r.grads_ticket = r.params_ticket = -1;
  return absl::OkStatus();
}

absl::StatusOr<float*> HostOffload::Range(int region, int kind, int64_t offset, int64_t count) const {
  if (region < 0 || region >= num_regions() || kind < -1 || kind >= state_kinds_) {
    return absl::InvalidArgumentError(absl::StrCat("host offload: region ", region, " kind ", kind, " is not one of ",
                                                   num_regions(), " regions and kinds [-1, ", state_kinds_, ")"));
  }
  const Region& r = regions_[region];
  if (offset < 0 || count < 0 || offset + count > r.numel) {
    return absl::OutOfRangeError(absl::StrCat("host offload: elements [", offset, ", ", offset + count,
                                              ") outside region ", region, "'s ", r.numel));
  }
  const Pinned& p = kind < 0 ? r.master : r.state[kind];
  return p.buffer.as<float>() + offset;
}

absl::Status HostOffload::Read(int region, int kind, int64_t offset, int64_t count, float* out) const {
  ASSIGN_OR_RETURN(float* src, Range(region, kind, offset, count));
  if (count > 0) std::memcpy(out, src, static_cast<size_t>(count) * sizeof(float));
  return absl::OkStatus();
}

absl::Status HostOffload::Write(int region, int kind, int64_t offset, int64_t count, const float* in) {
  ASSIGN_OR_RETURN(float* dst, Range(region, kind, offset, count));
  if (count > 0) std::memcpy(dst, in, static_cast<size_t>(count) * sizeof(float));
  return absl::OkStatus();
}

}  // namespace zeroshard
