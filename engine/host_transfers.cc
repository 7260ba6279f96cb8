#include "engine/host_transfers.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

#ifdef ZEROSHARD_HAS_CUDA
#include <cuda_runtime_api.h>
#endif

namespace zeroshard {

absl::StatusOr<int64_t> MemcpyHostTransfers::ToHost(void* host, const void* device, size_t bytes) {
  if (bytes > 0) std::memcpy(host, device, bytes);
  return issued_++;
}

absl::StatusOr<int64_t> MemcpyHostTransfers::ToDevice(void* device, const void* host, size_t bytes) {
  if (bytes > 0) std::memcpy(device, host, bytes);
  return issued_++;
}

absl::Status MemcpyHostTransfers::CheckTicket(int64_t ticket) const {
  if (ticket < 0 || ticket >= issued_) {
    return absl::InvalidArgumentError(
        absl::StrCat("host transfer ticket ", ticket, " was never issued; expected one in [0, ", issued_, ")"));
  }
  return absl::OkStatus();
}

absl::Status MemcpyHostTransfers::WaitOnHost(int64_t ticket) { return CheckTicket(ticket); }
absl::Status MemcpyHostTransfers::OrderCompute(int64_t ticket) { return CheckTicket(ticket); }

#ifdef ZEROSHARD_HAS_CUDA
namespace {

absl::Status Check(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();  // clear a sticky launch error so that later calls report their own
  return absl::InternalError(absl::StrCat("host offload: ", call, " failed: ", cudaGetErrorString(err)));
}

class CudaHostTransfers : public HostTransfers {
 public:
  explicit CudaHostTransfers(cudaStream_t compute) : compute_(compute) {}
  ~CudaHostTransfers() override {
    if (side_ != nullptr) cudaStreamSynchronize(side_);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    if (compute_ready_ != nullptr) cudaEventDestroy(compute_ready_);
    if (side_ != nullptr) cudaStreamDestroy(side_);
  }

  absl::Status Init() {
    // Non-blocking: the copies must not serialise with the legacy default
    // stream that the (blocking) compute stream orders with.
    RETURN_IF_ERROR(Check(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"));
    return Check(cudaEventCreateWithFlags(&compute_ready_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  }

  absl::StatusOr<int64_t> ToHost(void* host, const void* device, size_t bytes) override {
    absl::Status s = Check(cudaEventRecord(compute_ready_, compute_), "cudaEventRecord (compute stream)");
    if (s.ok()) s = Check(cudaStreamWaitEvent(side_, compute_ready_, 0), "cudaStreamWaitEvent (side stream)");
    if (s.ok() && bytes > 0) {
      s = Check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, side_), "cudaMemcpyAsync device to host");
    }
    if (!s.ok()) return s;
    return Record();
  }

  absl::StatusOr<int64_t> ToDevice(void* device, const void* host, size_t bytes) override {
    if (bytes > 0) {
      absl::Status s =
          Check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, side_), "cudaMemcpyAsync host to device");
      if (!s.ok()) return s;
    }
    return Record();
  }

  absl::Status WaitOnHost(int64_t ticket) override {
    cudaEvent_t e = nullptr;
    RETURN_IF_ERROR(Event(ticket, &e));
    return e == nullptr ? absl::OkStatus() : Check(cudaEventSynchronize(e), "cudaEventSynchronize");
  }

  absl::Status OrderCompute(int64_t ticket) override {
    cudaEvent_t e = nullptr;
    RETURN_IF_ERROR(Event(ticket, &e));
    return e == nullptr ? absl::OkStatus()
                        : Check(cudaStreamWaitEvent(compute_, e, 0), "cudaStreamWaitEvent (compute stream)");
  }

  absl::Status Drain() override {
    RETURN_IF_ERROR(Check(cudaStreamSynchronize(side_), "cudaStreamSynchronize (side stream)"));
    // Every recorded event has completed: the pool is free again.
    base_ = issued_;
    return absl::OkStatus();
  }

 private:
  // The event of `ticket`; null when a Drain has passed it.
  absl::Status Event(int64_t ticket, cudaEvent_t* e) const {
    if (ticket < 0 || ticket >= issued_) {
      return absl::InvalidArgumentError(
          absl::StrCat("host transfer ticket ", ticket, " was never issued; expected one in [0, ", issued_, ")"));
    }
    *e = ticket < base_ ? nullptr : events_[static_cast<size_t>(ticket - base_)];
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> Record() {
    const size_t slot = static_cast<size_t>(issued_ - base_);
    if (slot == events_.size()) {
      cudaEvent_t e = nullptr;
      RETURN_IF_ERROR(Check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags"));
      events_.push_back(e);
    }
    RETURN_IF_ERROR(Check(cudaEventRecord(events_[slot], side_), "cudaEventRecord (side stream)"));
    return issued_++;
  }

  cudaStream_t compute_ = nullptr;
  cudaStream_t side_ = nullptr;
  cudaEvent_t compute_ready_ = nullptr;
  std::vector<cudaEvent_t> events_;  // ticket base_ + i records events_[i]
  int64_t base_ = 0;
  int64_t issued_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<HostTransfers>> CreateCudaHostTransfers(void* compute_stream) {
  auto t = std::make_unique<CudaHostTransfers>(static_cast<cudaStream_t>(compute_stream));
  absl::Status s = t->Init();
  if (!s.ok()) return s;
  return std::unique_ptr<HostTransfers>(std::move(t));
}
#else
absl::StatusOr<std::unique_ptr<HostTransfers>> CreateCudaHostTransfers(void*) {
  return absl::UnavailableError("host offload on CUDA requested but zeroshard was built without CUDA");
}
#endif

}  // namespace zeroshard
