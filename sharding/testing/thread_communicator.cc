#include "sharding/testing/thread_communicator.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace zeroshard {

class ThreadGroupState {
 public:
  explicit ThreadGroupState(int size) : size_(size), in_(size), out_(size) {}

  // Blocks until all `size_` threads have arrived.
  void Barrier() {
    absl::MutexLock lock(&mu_);
    const int64_t gen = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      return;
    }
    auto released = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return generation_ != gen; };
    mu_.Await(absl::Condition(&released));
  }

  int size_;
  std::vector<const void*> in_;  // published by each rank for the current op
  std::vector<void*> out_;

 private:
  absl::Mutex mu_;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

namespace {

class DoneWork : public Work {
 public:
  explicit DoneWork(absl::Status s) : status_(std::move(s)) {}
  bool IsCompleted() override { return true; }
  absl::Status Wait(absl::Duration) override { return status_; }

 private:
  absl::Status status_;
};

std::unique_ptr<Work> Done(absl::Status s = absl::OkStatus()) { return std::make_unique<DoneWork>(std::move(s)); }

template <typename T>
T Combine(T a, T b, ReduceOp op) {
  return op == ReduceOp::kMax ? (a > b ? a : b) : a + b;
}

class ThreadCommunicator : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<ThreadGroupState> group, int rank, std::string name)
      : group_(std::move(group)), rank_(rank), name_(std::move(name)) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size_; }
  const std::string& name() const override { return name_; }
  Device device() const override { return Device::kCpu; }

  std::unique_ptr<Work> AllGather(const void* in, void* out, int64_t count, DType dtype) override {
    stats_.Record(CommOp::kAllGather, size(), count * DTypeSize(dtype), false);
    Publish(in, out);
    const size_t bytes = count * DTypeSize(dtype);
    for (int r = 0; r < size(); ++r) {
      char* dst = static_cast<char*>(out) + r * bytes;
      if (dst != group_->in_[r]) std::memcpy(dst, group_->in_[r], bytes);
    }
    group_->Barrier();
    return Done();
  }

  // Moves bytes, so any dtype: block rank() of every rank's input, in rank order.
  std::unique_ptr<Work> AllToAll(const void* in, void* out, int64_t count, DType dtype) override {
    stats_.Record(CommOp::kAllToAll, size(), count * DTypeSize(dtype), false);
    Publish(in, out);
    const size_t bytes = count * DTypeSize(dtype);
    if (bytes > 0) {
      for (int r = 0; r < size(); ++r) {
        std::memcpy(static_cast<char*>(out) + r * bytes, static_cast<const char*>(group_->in_[r]) + rank_ * bytes,
                    bytes);
      }
    }
    group_->Barrier();  // no rank reuses its input before everyone has read it
    return Done();
  }

  std::unique_ptr<Work> ReduceScatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override {
    stats_.Record(CommOp::kReduceScatter, size(), count * DTypeSize(dtype), false);
    if (dtype != DType::kF32 && dtype != DType::kI32) return Unsupported(dtype);
    Publish(in, out);
    if (dtype == DType::kF32) {
      Reduce<float>(rank_ * count, count, op, static_cast<float*>(out));
    } else {
      Reduce<int32_t>(rank_ * count, count, op, static_cast<int32_t*>(out));
    }
    group_->Barrier();
    return Done();
  }

  std::unique_ptr<Work> AllReduce(void* buf, int64_t count, DType dtype, ReduceOp op) override {
    stats_.Record(CommOp::kAllReduce, size(), count * DTypeSize(dtype), false);
    if (dtype != DType::kF32 && dtype != DType::kI32) return Unsupported(dtype);
    Publish(buf, buf);
    std::vector<char> tmp(count * DTypeSize(dtype));
    if (dtype == DType::kF32) {
      Reduce<float>(0, count, op, reinterpret_cast<float*>(tmp.data()));
    } else {
      Reduce<int32_t>(0, count, op, reinterpret_cast<int32_t*>(tmp.data()));
    }
    group_->Barrier();  // everyone has read every input
    std::memcpy(buf, tmp.data(), tmp.size());
    group_->Barrier();
    return Done();
  }

  std::unique_ptr<Work> Broadcast(void*, int64_t, DType, int) override { return Unimplemented("Broadcast"); }
  std::unique_ptr<Work> Send(const void*, int64_t, DType, int, int) override { return Unimplemented("Send"); }
  std::unique_ptr<Work> Recv(void*, int64_t, DType, int, int) override { return Unimplemented("Recv"); }
  std::unique_ptr<Work> Barrier() override {
    stats_.Record(CommOp::kBarrier, size(), 0, false);
    group_->Barrier();
    return Done();
  }
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int, int, const std::string&) override {
    return absl::UnimplementedError("ThreadCommunicator does not split");
  }
  CommStats Stats() const override { return stats_; }

 private:
  void Publish(const void* in, void* out) {
    group_->in_[rank_] = in;
    group_->out_[rank_] = out;
    group_->Barrier();
  }

  // out[i] = op over ranks r (in order) of in_r[offset + i].
  template <typename T>
  void Reduce(int64_t offset, int64_t count, ReduceOp op, T* out) {
    for (int64_t i = 0; i < count; ++i) {
      T acc = static_cast<const T*>(group_->in_[0])[offset + i];
      for (int r = 1; r < size(); ++r) acc = Combine(acc, static_cast<const T*>(group_->in_[r])[offset + i], op);
      if (op == ReduceOp::kAvg) acc = acc / static_cast<T>(size());
      out[i] = acc;
    }
  }

  std::unique_ptr<Work> Unsupported(DType dtype) {
    return Done(absl::UnimplementedError(absl::StrCat("ThreadCommunicator reduces f32 and i32, not ", DTypeName(dtype))));
  }
  std::unique_ptr<Work> Unimplemented(const char* what) {
    return Done(absl::UnimplementedError(absl::StrCat("ThreadCommunicator has no ", what)));
  }

  std::shared_ptr<ThreadGroupState> group_;
  int rank_;
  std::string name_;
  CommStats stats_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> CreateThreadGroup(int size, const std::string& name) {
  auto state = std::make_shared<ThreadGroupState>(size);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < size; ++r) comms.push_back(std::make_unique<ThreadCommunicator>(state, r, name));
  return comms;
}

}  // namespace zeroshard
