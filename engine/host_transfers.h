// HostTransfers: the copies of host offload on a GPU (docs/offload.md, "Host
// offload on GPU") — reduced gradients device → host, rounded parameters
// host → device — queued beside the compute stream. Every copy gets a
// ticket; the optimizer phase blocks the CPU on a gradient's ticket before
// updating and makes the compute stream wait on a parameter's ticket before
// anything reads the parameters. Not thread-safe.
#ifndef ZEROSHARD_ENGINE_HOST_TRANSFERS_H_
#define ZEROSHARD_ENGINE_HOST_TRANSFERS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zeroshard {

class HostTransfers {
 public:
  virtual ~HostTransfers() = default;
  // Device → host, ordered after everything the compute stream holds now.
  // `host` must be pinned and untouched until WaitOnHost(ticket).
  virtual absl::StatusOr<int64_t> ToHost(void* host, const void* device, size_t bytes) = 0;
  // Host → device, ordered after every earlier copy of this queue.
  // `host` must stay untouched until the copy is done (a later ticket's
  // WaitOnHost or Drain says so).
  virtual absl::StatusOr<int64_t> ToDevice(void* device, const void* host, size_t bytes) = 0;
  // Blocks the calling thread until copy `ticket` is done.
  virtual absl::Status WaitOnHost(int64_t ticket) = 0;
  // Work issued later on the compute stream starts after copy `ticket`.
  virtual absl::Status OrderCompute(int64_t ticket) = 0;
  // Blocks until every copy issued so far is done.
  virtual absl::Status Drain() = 0;
};

// A CPU device's queue: each copy is a memcpy done before the call returns,
// so every wait is already satisfied. What the host-offload path runs on a
// CPU device (its tests).
class MemcpyHostTransfers : public HostTransfers {
 public:
  absl::StatusOr<int64_t> ToHost(void* host, const void* device, size_t bytes) override;
  absl::StatusOr<int64_t> ToDevice(void* device, const void* host, size_t bytes) override;
  absl::Status WaitOnHost(int64_t ticket) override;
  absl::Status OrderCompute(int64_t ticket) override;
  absl::Status Drain() override { return absl::OkStatus(); }

 private:
  absl::Status CheckTicket(int64_t ticket) const;
  int64_t issued_ = 0;
};

// The CUDA queue: one non-blocking side stream; ToHost records an event on
// `compute_stream` and makes the side stream wait for it, every copy records
// its own event (reused from a pool once every earlier copy has finished).
// Every CUDA call is checked: kInternal naming the call and CUDA's error.
// kUnavailable in a build without CUDA.
absl::StatusOr<std::unique_ptr<HostTransfers>> CreateCudaHostTransfers(void* compute_stream);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_HOST_TRANSFERS_H_
