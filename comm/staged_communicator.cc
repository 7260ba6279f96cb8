#include "comm/staged_communicator.h"

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace zeroshard {
namespace {

// Page-locked blocks by size; a block is lent to one operation at a time
// and freed with the pool.
class PinnedPool {
 public:
  absl::StatusOr<PinnedHostBuffer> Acquire(size_t bytes) {
    if (bytes == 0) return PinnedHostBuffer();
    {
      absl::MutexLock lock(&mu_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        PinnedHostBuffer b = std::move(it->second.back());
        it->second.pop_back();
        return b;
      }
    }
    return PinnedHostBuffer::Allocate(bytes);
  }
  void Release(PinnedHostBuffer b) {
    if (b.empty()) return;
    absl::MutexLock lock(&mu_);
    free_[b.bytes()].push_back(std::move(b));
  }

 private:
  absl::Mutex mu_;
  std::map<size_t, std::vector<PinnedHostBuffer>> free_ ABSL_GUARDED_BY(mu_);
};

// The host operation, then (once, on Wait or destruction) the copy of its
// result back to the device and the return of the staging blocks.
class StagedWork : public Work {
 public:
  StagedWork(std::unique_ptr<Work> inner, std::shared_ptr<PinnedPool> pool, std::vector<PinnedHostBuffer> blocks,
             std::function<absl::Status()> copy_out)
      : inner_(std::move(inner)), pool_(std::move(pool)), blocks_(std::move(blocks)), copy_out_(std::move(copy_out)) {}
  ~StagedWork() override {
    if (!finished_) Finish(inner_->Wait()).IgnoreError();
  }
  std::optional<WorkSpan> ExecutedSpan() override { return inner_->ExecutedSpan(); }
  // Completed only once the result is back on the device: a caller may read
  // the output as soon as this says true.
  bool IsCompleted() override {
    if (!finished_ && inner_->IsCompleted()) Finish(inner_->Wait()).IgnoreError();
    return finished_;
  }
  absl::Status Wait(absl::Duration timeout) override {
    if (finished_) return status_;
    absl::Status s = inner_->Wait(timeout);
    if (s.code() == absl::StatusCode::kDeadlineExceeded) return s;
    return Finish(s);
  }

 private:
  absl::Status Finish(absl::Status s) {
    if (s.ok() && copy_out_) s = copy_out_();
    for (PinnedHostBuffer& b : blocks_) pool_->Release(std::move(b));
    blocks_.clear();
    finished_ = true;
    status_ = s;
    return s;
  }

  std::unique_ptr<Work> inner_;
  std::shared_ptr<PinnedPool> pool_;
  std::vector<PinnedHostBuffer> blocks_;
  std::function<absl::Status()> copy_out_;
  bool finished_ = false;
  absl::Status status_;
};

// A Work that already failed (staging could not be set up).
class FailedWork : public Work {
 public:
  explicit FailedWork(absl::Status s) : status_(std::move(s)) {}
  bool IsCompleted() override { return true; }
  absl::Status Wait(absl::Duration) override { return status_; }

 private:
  absl::Status status_;
};

class StagedCommunicator : public Communicator {
 public:
  StagedCommunicator(std::unique_ptr<Communicator> host, Device device)
      : host_(std::move(host)), device_(device), pool_(std::make_shared<PinnedPool>()) {}
  ~StagedCommunicator() override {
    // The host communicator's destructor waits for its operations; the
    // pool outlives them through the Works' references.
    host_.reset();
  }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const std::string& name() const override { return host_->name(); }
  Device device() const override { return device_; }

  std::unique_ptr<Work> AllGather(const void* in, void* out, int64_t count, DType dtype) override {
    const size_t part = Bytes(count, dtype);
    return Stage({{in, part}}, {{out, part * size()}}, [&](std::vector<void*>& h) {
      return host_->AllGather(h[0], h[1], count, dtype);
    });
  }
  std::unique_ptr<Work> ReduceScatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override {
    const size_t part = Bytes(count, dtype);
    return Stage({{in, part * size()}}, {{out, part}}, [&](std::vector<void*>& h) {
      return host_->ReduceScatter(h[0], h[1], count, dtype, op);
    });
  }
  std::unique_ptr<Work> AllToAll(const void* in, void* out, int64_t count, DType dtype) override {
    const size_t all = Bytes(count, dtype) * size();
    // Staging would hide an overlap that the host backend rejects.
    const auto a = reinterpret_cast<uintptr_t>(in), b = reinterpret_cast<uintptr_t>(out);
    if (all > 0 && a < b + all && b < a + all) {
      return std::make_unique<FailedWork>(
          absl::InvalidArgumentError("AllToAll input and output overlap; they must be separate buffers"));
    }
    return Stage({{in, all}}, {{out, all}}, [&](std::vector<void*>& h) {
      return host_->AllToAll(h[0], h[1], count, dtype);
    });
  }
  std::unique_ptr<Work> AllReduce(void* buf, int64_t count, DType dtype, ReduceOp op) override {
    return StageInPlace(buf, Bytes(count, dtype), [&](void* h) { return host_->AllReduce(h, count, dtype, op); });
  }
  std::unique_ptr<Work> Broadcast(void* buf, int64_t count, DType dtype, int root) override {
    return StageInPlace(buf, Bytes(count, dtype), [&](void* h) { return host_->Broadcast(h, count, dtype, root); });
  }
  std::unique_ptr<Work> Send(const void* buf, int64_t count, DType dtype, int peer, int tag) override {
    return Stage({{buf, Bytes(count, dtype)}}, {}, [&](std::vector<void*>& h) {
      return host_->Send(h[0], count, dtype, peer, tag);
    });
  }
  std::unique_ptr<Work> Recv(void* buf, int64_t count, DType dtype, int peer, int tag) override {
    return Stage({}, {{buf, Bytes(count, dtype)}}, [&](std::vector<void*>& h) {
      return host_->Recv(h[0], count, dtype, peer, tag);
    });
  }
  std::unique_ptr<Work> Barrier() override { return host_->Barrier(); }

  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key, const std::string& name) override {
    absl::StatusOr<std::unique_ptr<Communicator>> split = host_->Split(color, key, name);
    if (!split.ok()) return split.status();
    return std::unique_ptr<Communicator>(new StagedCommunicator(std::move(*split), device_));
  }

  CommStats Stats() const override { return host_->Stats(); }

 private:
  struct Span {
    const void* device;
    size_t bytes;
  };

  static size_t Bytes(int64_t count, DType dtype) {
    return count < 0 ? 0 : static_cast<size_t>(count) * DTypeSize(dtype);
  }

  // Copies every input to its own host block, issues `issue` over the host
  // blocks (inputs first, then outputs) and copies the outputs back on Wait.
  // A negative count reaches the host backend unchanged, which rejects it.
  std::unique_ptr<Work> Stage(std::vector<Span> inputs, std::vector<Span> outputs,
                              const std::function<std::unique_ptr<Work>(std::vector<void*>&)>& issue) {
    std::vector<PinnedHostBuffer> blocks;
    std::vector<void*> host;
    for (const Span& s : inputs) {
      absl::StatusOr<PinnedHostBuffer> b = pool_->Acquire(s.bytes);
      if (!b.ok()) return std::make_unique<FailedWork>(b.status());
      host.push_back(b->data());
      blocks.push_back(*std::move(b));
      absl::Status copied = DeviceCopy(host.back(), Device::kCpu, s.device, device_, s.bytes);
      if (!copied.ok()) return std::make_unique<FailedWork>(copied);
    }
    struct CopyBack {
      void* device;
      const void* host;
      size_t bytes;
    };
    std::vector<CopyBack> copies;
    for (const Span& s : outputs) {
      absl::StatusOr<PinnedHostBuffer> b = pool_->Acquire(s.bytes);
      if (!b.ok()) return std::make_unique<FailedWork>(b.status());
      host.push_back(b->data());
      blocks.push_back(*std::move(b));
      copies.push_back({const_cast<void*>(s.device), host.back(), s.bytes});
    }
    std::unique_ptr<Work> inner = issue(host);
    const Device device = device_;
    return std::make_unique<StagedWork>(std::move(inner), pool_, std::move(blocks), [copies, device]() {
      for (const CopyBack& c : copies) {
        absl::Status s = DeviceCopy(c.device, device, c.host, Device::kCpu, c.bytes);
        if (!s.ok()) return s;
      }
      return absl::OkStatus();
    });
  }

  // The same for a collective that works in place (one block, in and out).
  std::unique_ptr<Work> StageInPlace(void* buf, size_t bytes,
                                     const std::function<std::unique_ptr<Work>(void*)>& issue) {
    absl::StatusOr<PinnedHostBuffer> b = pool_->Acquire(bytes);
    if (!b.ok()) return std::make_unique<FailedWork>(b.status());
    void* host = b->data();
    absl::Status copied = DeviceCopy(host, Device::kCpu, buf, device_, bytes);
    if (!copied.ok()) return std::make_unique<FailedWork>(copied);
    std::vector<PinnedHostBuffer> blocks;
    blocks.push_back(*std::move(b));
    const Device device = device_;
    return std::make_unique<StagedWork>(issue(host), pool_, std::move(blocks), [buf, host, bytes, device]() {
      return DeviceCopy(buf, device, host, Device::kCpu, bytes);
    });
  }

  std::unique_ptr<Communicator> host_;
  Device device_;
  std::shared_ptr<PinnedPool> pool_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateStagedCommunicator(std::unique_ptr<Communicator> host,
                                                                        Device device) {
  if (host == nullptr) return absl::InvalidArgumentError("CreateStagedCommunicator got no host communicator");
  if (host->device() != Device::kCpu) {
    return absl::InvalidArgumentError(absl::StrCat("CreateStagedCommunicator: '", host->name(), "' moves ",
                                                   DeviceName(host->device()), " buffers, expected a host (cpu) one"));
  }
  return std::unique_ptr<Communicator>(new StagedCommunicator(std::move(host), device));
}

}  // namespace zeroshard
