// HostOffload: the optimizer state and f32 master weights of a rank's
// optimizer regions in pinned host memory while the engine computes on a
// GPU, the ZeRO-Offload way (docs/offload.md, "Host offload on GPU"). Per
// region it holds the master, each state kind, a staging buffer for the
// reduced f32 gradient (device → host as soon as the bucket's reduction is
// done) and, for a compute dtype narrower than f32, one for the rounded
// parameters (host → device before their next use). The update itself runs
// on the CPU with the CPU optimizer kernels, so it gives the CPU engine's
// bits. The copies go through a HostTransfers queue.
//
// Memory: master in kMasterParams, state in kOptimizerState, both staging
// buffers in kOffloadStaging — the categories the memory plan's host tier
// counts them in. Not thread-safe.
#ifndef ZEROSHARD_ENGINE_HOST_OFFLOAD_H_
#define ZEROSHARD_ENGINE_HOST_OFFLOAD_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/memory_tracker.h"
#include "engine/engine_options.h"
#include "engine/host_transfers.h"
#include "kernels/context.h"

namespace zeroshard {

// Whether `options` run the host-offload path: HOST optimizer state and
// HOST master weights (the CPU update needs both) beside a CUDA device (or on a CPU device when
// options.offload.host_update_on_cpu_device says so, for tests).
bool UsesHostOffload(const EngineOptions& options);

// Pinned staging bytes the path adds for a region of `numel` elements: the
// f32 gradient, plus the rounded parameters unless `compute_dtype` is f32
// (then the master itself is copied).
int64_t HostOffloadStagingBytes(int64_t numel, DType compute_dtype);

class HostOffload {
 public:
  // One region per entry of `region_numel`; `state_kinds` f32 buffers per
  // region (zeroed, as the optimizer state starts), the master zeroed (its
  // padding stays zero). kResourceExhausted when pinned memory runs out or
  // a tracker limit is hit.
  static absl::StatusOr<std::unique_ptr<HostOffload>> Create(std::vector<int64_t> region_numel, int state_kinds,
                                                             DType compute_dtype, MemoryTracker* tracker,
                                                             std::unique_ptr<HostTransfers> transfers);
  ~HostOffload();
  HostOffload(const HostOffload&) = delete;
  HostOffload& operator=(const HostOffload&) = delete;

  int num_regions() const { return static_cast<int>(regions_.size()); }
  int state_kinds() const { return state_kinds_; }
  int64_t numel(int region) const { return regions_[region].numel; }
  float* master(int region);
  float* state(int region, int kind);
  // The host copy of the region's reduced gradient (valid after WaitGrads).
  float* grads(int region);

  // Queues the copy of the region's reduced gradient (numel f32 at
  // `device_grads`) to its host staging, after the compute stream's work.
  absl::Status FetchGrads(int region, const float* device_grads);
  bool grads_fetched(int region) const { return regions_[region].grads_ticket >= 0; }
  // Blocks until the region's FetchGrads is done. kFailedPrecondition when
  // none was queued since the last Drain.
  absl::Status WaitGrads(int region);
  // Rounds the region's master to the compute dtype on the CPU (`cpu`, a
  // CPU kernel context: nearest even, as UnitShard rounds) and queues its
  // copy to `device_params` (numel elements of the compute dtype).
  absl::Status PushParams(int region, void* device_params, const kernels::KernelContext& cpu);
  // Work issued later on the compute stream reads the pushed parameters.
  // kFailedPrecondition when no push was queued since the last Drain.
  absl::Status OrderParams(int region);
  // Waits for every queued copy and forgets the step's tickets.
  absl::Status Drain();

  // Elements [offset, offset + count) of the region's master (kind -1) or
  // state kind `kind`, to or from host memory. kOutOfRange outside.
  absl::Status Read(int region, int kind, int64_t offset, int64_t count, float* out) const;
  absl::Status Write(int region, int kind, int64_t offset, int64_t count, const float* in);

  // The queue the copies go through (tests put a recording one in).
  void set_transfers(std::unique_ptr<HostTransfers> transfers) { transfers_ = std::move(transfers); }

 private:
  // Pinned bytes counted in one tracker category while held.
  struct Pinned {
    PinnedHostBuffer buffer;
    MemoryCategory category = MemoryCategory::kWorkspace;
  };
  struct Region {
    int64_t numel = 0;
    Pinned master;
    std::vector<Pinned> state;
    Pinned grads;
    Pinned params;  // empty for f32 compute
    int64_t grads_ticket = -1;
    int64_t params_ticket = -1;
  };
  HostOffload() = default;
  absl::StatusOr<Pinned> Allocate(MemoryCategory category, int64_t bytes);
  absl::StatusOr<float*> Range(int region, int kind, int64_t offset, int64_t count) const;

  MemoryTracker* tracker_ = nullptr;
  DType compute_dtype_ = DType::kF32;
  int state_kinds_ = 0;
  std::vector<Region> regions_;
  std::unique_ptr<HostTransfers> transfers_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_HOST_OFFLOAD_H_
