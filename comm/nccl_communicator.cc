#include "comm/nccl_communicator.h"

#include "absl/strings/str_cat.h"

#ifdef ZEROSHARD_HAS_CUDA
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <deque>
#include <functional>
#include <vector>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "comm/async_work.h"
#include "comm/collective_checker.h"
#include "comm/fingerprint.h"
#include "comm/mpi_env.h"
#include "comm/watchdog.h"
#include "core/status_macros.h"
#endif

namespace zeroshard {

#ifndef ZEROSHARD_HAS_CUDA

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclWorld(const CommOptions&, int) {
  return absl::UnavailableError("NCCL backend unavailable: built without CUDA (--//bazel:cuda=false or no nvcc)");
}
absl::Status SetNcclComputeStream(Communicator& comm, void*) {
  return absl::InvalidArgumentError(absl::StrCat("communicator ", comm.name(), " is not an NCCL communicator"));
}
absl::Status WaitOnStream(Work&, void*) {
  return absl::InvalidArgumentError("not an NCCL Work (built without CUDA)");
}

#else  // ZEROSHARD_HAS_CUDA

namespace {

absl::Status CudaStatus(cudaError_t err, absl::string_view what) {
  if (err == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  return absl::InternalError(absl::StrCat(what, " failed: ", cudaGetErrorString(err)));
}

absl::Status NcclStatus(ncclResult_t r, absl::string_view what) {
  if (r == ncclSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " failed: ", ncclGetErrorString(r)));
}

// u16 never reaches arithmetic (reductions reject it), so it moves as f16.
ncclDataType_t NcclType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kF16:
    case DType::kU16:
      return ncclFloat16;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kI32:
      return ncclInt32;
    case DType::kI8:
      return ncclInt8;
  }
  return ncclInt8;
}

bool IsReducible(DType dtype) { return dtype != DType::kU16 && dtype != DType::kI8; }

ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
  }
  return ncclSum;
}

// Launches the pending batch of Send/Recv (see NcclCommunicator::IssueP2P).
class P2PFlusher {
 public:
  virtual ~P2PFlusher() = default;
  virtual absl::Status FlushP2P() = 0;
};

// A completion event shared by a Work and the communicator's monitor. For a
// point-to-point batch not yet launched, `event` is null and `flusher`
// launches it.
struct CompletionEvent {
  cudaEvent_t event = nullptr;
  int device = 0;
  std::string what;
  absl::Time start;
  P2PFlusher* flusher = nullptr;
  absl::Status launch_error;
  ~CompletionEvent() {
    if (event) cudaEventDestroy(event);
  }
  bool Done() const { return event != nullptr && cudaEventQuery(event) == cudaSuccess; }
  // Launches a pending point-to-point batch; its error if that failed.
  absl::Status EnsureLaunched() {
    if (event == nullptr && flusher != nullptr) {
      absl::Status s = flusher->FlushP2P();
      if (!s.ok()) launch_error = s;
    }
    return launch_error;
  }
};

class NcclWork : public Work {
 public:
  NcclWork(std::shared_ptr<CompletionEvent> done, ncclComm_t comm) : done_(std::move(done)), comm_(comm) {}
  bool IsCompleted() override {
    cudaSetDevice(done_->device);
    if (!done_->EnsureLaunched().ok()) return true;
    return done_->Done();
  }
  absl::Status Wait(absl::Duration timeout) override {
    cudaSetDevice(done_->device);
    if (absl::Status s = done_->EnsureLaunched(); !s.ok()) return s;
    const absl::Time deadline = timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
    absl::Duration pause = absl::Microseconds(1);
    while (true) {
      cudaError_t q = cudaEventQuery(done_->event);
      if (q == cudaSuccess) return absl::OkStatus();
      if (q != cudaErrorNotReady) return CudaStatus(q, absl::StrCat("waiting for ", done_->what));
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        return NcclStatus(async, absl::StrCat(done_->what, " (asynchronous NCCL error)"));
      }
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat(done_->what, " did not finish within ", absl::FormatDuration(timeout)));
      }
      absl::SleepFor(pause);
      pause = std::min(pause * 2, absl::Microseconds(200));
    }
  }
  absl::Status WaitOn(void* cuda_stream) override {
    cudaSetDevice(done_->device);
    cudaEvent_t e = event();
    if (e == nullptr) return Wait(absl::ZeroDuration());  // the launch failed: its error
    return CudaStatus(cudaStreamWaitEvent(static_cast<cudaStream_t>(cuda_stream), e, 0), "cudaStreamWaitEvent");
  }
  // The completion event, launching a pending batch first (null on failure).
  cudaEvent_t event() {
    done_->EnsureLaunched().IgnoreError();
    return done_->event;
  }

 private:
  std::shared_ptr<CompletionEvent> done_;
  ncclComm_t comm_;
};

class NcclCommunicator : public Communicator, public P2PFlusher {
 public:
  // Collective over `mpi_comm` (owned): creates the NCCL communicator.
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(MPI_Comm mpi_comm, const std::string& name,
                                                              const CommOptions& options, int device) {
    auto self = std::unique_ptr<NcclCommunicator>(new NcclCommunicator(mpi_comm, name, options, device));
    RETURN_IF_ERROR(self->Init());
    return std::unique_ptr<Communicator>(std::move(self));
  }

  ~NcclCommunicator() override {
    FlushP2P().IgnoreError();
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    if (monitor_.joinable()) monitor_.join();
    cudaSetDevice(device_);
    if (stream_) cudaStreamSynchronize(stream_);
    if (comm_) ncclCommDestroy(comm_);
    if (stream_) cudaStreamDestroy(stream_);
    if (ready_) cudaEventDestroy(ready_);
    if (barrier_buf_) cudaFree(barrier_buf_);
    checker_.reset();
    watchdog_.reset();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&mpi_comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  Device device() const override { return Device::kCuda; }

  std::unique_ptr<Work> AllGather(const void* in, void* out, int64_t count, DType dtype) override {
    if (count < 0) return AsyncWork::Done(BadCount(count));
    CollectiveFingerprint fp{0, CommOp::kAllGather, count, dtype, -1, ReduceOp::kSum};
    return Issue(fp, count * DTypeSize(dtype), false, [=](cudaStream_t s) {
      return ncclAllGather(in, out, count, NcclType(dtype), comm_, s);
    });
  }
  // One NCCL group of a send and a receive per peer (self included), which
  // NCCL runs concurrently: issued one by one they would deadlock.
  std::unique_ptr<Work> AllToAll(const void* in, void* out, int64_t count, DType dtype) override {
    if (count < 0) return AsyncWork::Done(BadCount(count));
    const int64_t bytes = count * static_cast<int64_t>(DTypeSize(dtype));
    const auto a = reinterpret_cast<uintptr_t>(in), b = reinterpret_cast<uintptr_t>(out);
    const int64_t total = bytes * size_;
    if (total > 0 && a < b + total && b < a + total) {
      return AsyncWork::Done(
          absl::InvalidArgumentError("AllToAll input and output overlap; they must be separate buffers"));
    }
    CollectiveFingerprint fp{0, CommOp::kAllToAll, count, dtype, -1, ReduceOp::kSum};
    return Issue(fp, bytes, false, [=](cudaStream_t s) {
      ncclResult_t r = ncclGroupStart();
      if (r != ncclSuccess) return r;
      for (int peer = 0; peer < size_ && r == ncclSuccess; ++peer) {
        r = ncclSend(static_cast<const char*>(in) + peer * bytes, count, NcclType(dtype), peer, comm_, s);
        if (r == ncclSuccess) {
          r = ncclRecv(static_cast<char*>(out) + peer * bytes, count, NcclType(dtype), peer, comm_, s);
        }
      }
      const ncclResult_t end = ncclGroupEnd();  // closes the group even after an error
      return r != ncclSuccess ? r : end;
    });
  }
  std::unique_ptr<Work> ReduceScatter(const void* in, void* out, int64_t count, DType dtype,
                                      ReduceOp op) override {
    if (count < 0) return AsyncWork::Done(BadCount(count));
    if (!IsReducible(dtype)) return AsyncWork::Done(NotReducible(dtype));
    CollectiveFingerprint fp{0, CommOp::kReduceScatter, count, dtype, -1, op};
    return Issue(fp, count * DTypeSize(dtype), false, [=](cudaStream_t s) {
      return ncclReduceScatter(in, out, count, NcclType(dtype), NcclOp(op), comm_, s);
    });
  }
  std::unique_ptr<Work> AllReduce(void* buf, int64_t count, DType dtype, ReduceOp op) override {
    if (count < 0) return AsyncWork::Done(BadCount(count));
    if (!IsReducible(dtype)) return AsyncWork::Done(NotReducible(dtype));
    CollectiveFingerprint fp{0, CommOp::kAllReduce, count, dtype, -1, op};
    return Issue(fp, count * DTypeSize(dtype), false, [=](cudaStream_t s) {
      return ncclAllReduce(buf, buf, count, NcclType(dtype), NcclOp(op), comm_, s);
    });
  }
  std::unique_ptr<Work> Broadcast(void* buf, int64_t count, DType dtype, int root) override {
    if (count < 0) return AsyncWork::Done(BadCount(count));
    if (root < 0 || root >= size_) return AsyncWork::Done(BadRank(root, "root"));
    CollectiveFingerprint fp{0, CommOp::kBroadcast, count, dtype, root, ReduceOp::kSum};
    return Issue(fp, count * DTypeSize(dtype), root == rank_, [=](cudaStream_t s) {
      return ncclBroadcast(buf, buf, count, NcclType(dtype), root, comm_, s);
    });
  }
  // NCCL matches point-to-point by order per peer; `tag` is checked, not
  // used. Sends and receives are batched and launched together inside
  // ncclGroupStart/End when anything waits on one of them or the next
  // collective is issued: a ring of Send+Recv (or a send to self) issued as
  // separate kernels on one stream would deadlock.
  std::unique_ptr<Work> Send(const void* buf, int64_t count, DType dtype, int peer, int tag) override {
    if (count < 0) return AsyncWork::Done(BadCount(count));
    if (peer < 0 || peer >= size_) return AsyncWork::Done(BadRank(peer, "peer"));
    if (tag < 0 || tag > 32767) return AsyncWork::Done(BadTag(tag));
    return IssueP2P(CommOp::kSend,
                    absl::StrCat("Send(", DTypeName(dtype), ", ", count, ") to rank ", peer, " tag ", tag),
                    count * DTypeSize(dtype),
                    [=](cudaStream_t s) { return ncclSend(buf, count, NcclType(dtype), peer, comm_, s); });
  }
  std::unique_ptr<Work> Recv(void* buf, int64_t count, DType dtype, int peer, int tag) override {
    if (count < 0) return AsyncWork::Done(BadCount(count));
    if (peer < 0 || peer >= size_) return AsyncWork::Done(BadRank(peer, "peer"));
    if (tag < 0 || tag > 32767) return AsyncWork::Done(BadTag(tag));
    return IssueP2P(CommOp::kRecv,
                    absl::StrCat("Recv(", DTypeName(dtype), ", ", count, ") from rank ", peer, " tag ", tag),
                    count * DTypeSize(dtype),
                    [=](cudaStream_t s) { return ncclRecv(buf, count, NcclType(dtype), peer, comm_, s); });
  }
  std::unique_ptr<Work> Barrier() override {
    CollectiveFingerprint fp{0, CommOp::kBarrier, 0, DType::kF32, -1, ReduceOp::kSum};
    return Issue(fp, 0, false, [=](cudaStream_t s) {
      return ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclInt32, ncclSum, comm_, s);
    });
  }

  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key, const std::string& name) override {
    if (color < 0) return absl::InvalidArgumentError(absl::StrCat("Split color ", color, " must be >= 0"));
    RETURN_IF_ERROR(CheckIssue(CollectiveFingerprint{0, CommOp::kSplit, 0, DType::kF32, -1, ReduceOp::kSum}));
    MPI_Comm sub;
    RETURN_IF_ERROR(MpiStatus(MPI_Comm_split(mpi_comm_, color, key, &sub), "MPI_Comm_split"));
    return Create(sub, name, options_, device_);
  }

  CommStats Stats() const override {
    absl::MutexLock lock(&mu_);
    return stats_;
  }

  void set_compute_stream(cudaStream_t s) { compute_stream_ = s; }

 private:
  NcclCommunicator(MPI_Comm mpi_comm, std::string name, CommOptions options, int device)
      : mpi_comm_(mpi_comm), name_(std::move(name)), options_(options), device_(device) {
    MPI_Comm_set_errhandler(mpi_comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(mpi_comm_, &rank_);
    MPI_Comm_size(mpi_comm_, &size_);
  }

  absl::Status Init() {
    RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), absl::StrCat("cudaSetDevice(", device_, ")")));
    ncclUniqueId id;
    if (rank_ == 0) RETURN_IF_ERROR(NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId"));
    RETURN_IF_ERROR(MpiStatus(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, mpi_comm_), "MPI_Bcast of the NCCL id"));
    RETURN_IF_ERROR(NcclStatus(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank"));
    RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
    RETURN_IF_ERROR(CudaStatus(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate"));
    RETURN_IF_ERROR(CudaStatus(cudaMalloc(&barrier_buf_, sizeof(int32_t)), "cudaMalloc"));
    if (options_.debug_checks) {
      ASSIGN_OR_RETURN(checker_, CollectiveChecker::Create(mpi_comm_, name_));
    }
    watchdog_ = std::make_unique<CollectiveWatchdog>(name_, size_, options_.timeout,
                                                     [](const std::string& msg) { AbortJob(msg); });
    if (options_.timeout != absl::InfiniteDuration()) monitor_ = std::thread([this] { MonitorLoop(); });
    return absl::OkStatus();
  }

  absl::Status BadCount(int64_t count) const {
    return absl::InvalidArgumentError(absl::StrCat("element count ", count, " must be >= 0"));
  }
  static absl::Status NotReducible(DType dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype ", DTypeName(dtype), " cannot be reduced; expected f32, f16, bf16 or i32"));
  }
  static absl::Status BadTag(int tag) {
    return absl::InvalidArgumentError(absl::StrCat("tag ", tag, " is outside [0, 32767]"));
  }
  absl::Status BadRank(int r, const char* what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", r, " is not a rank of group ", name_, " (size ", size_, ")"));
  }

  // The fingerprint check of debug_checks (collectives only), bounded by the watchdog.
  absl::Status CheckIssue(CollectiveFingerprint fp) {
    if (!failure_.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("communicator ", name_, " is unusable after an earlier failure: ", failure_.message()));
    }
    if (fp.op == CommOp::kSend || fp.op == CommOp::kRecv) return absl::OkStatus();
    {
      absl::MutexLock lock(&mu_);
      fp.seq = ++seq_;
    }
    if (!checker_) return absl::OkStatus();
    watchdog_->Begin(fp, true);
    absl::Status s = checker_->Check(fp, watchdog_.get());
    watchdog_->End();
    if (!s.ok()) failure_ = s;
    return s;
  }

  template <typename Launch>
  std::unique_ptr<Work> Issue(CollectiveFingerprint fp, int64_t bytes_per_rank, bool is_root, Launch launch) {
    {
      absl::MutexLock lock(&mu_);
      stats_.Record(fp.op, size_, bytes_per_rank, is_root);
    }
    absl::Status s = FlushP2P();
    if (s.ok()) s = CheckIssue(fp);
    if (!s.ok()) return AsyncWork::Done(s);
    auto done = std::make_shared<CompletionEvent>();
    done->device = device_;
    done->what = absl::StrCat(DescribeCollective(fp), " in group ", name_);
    done->start = absl::Now();
    s = CudaStatus(cudaSetDevice(device_), "cudaSetDevice");
    if (s.ok()) s = CudaStatus(cudaEventCreateWithFlags(&done->event, cudaEventDisableTiming), "cudaEventCreate");
    if (s.ok()) s = CudaStatus(cudaEventRecord(ready_, compute_stream_), "cudaEventRecord");
    if (s.ok()) s = CudaStatus(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent");
    if (s.ok()) s = NcclStatus(launch(stream_), done->what);
    if (s.ok()) s = CudaStatus(cudaEventRecord(done->event, stream_), "cudaEventRecord");
    if (!s.ok()) {
      failure_ = s;
      return AsyncWork::Done(s);
    }
    {
      absl::MutexLock lock(&mu_);
      outstanding_.push_back(done);
    }
    return std::make_unique<NcclWork>(std::move(done), comm_);
  }

  template <typename Launch>
  std::unique_ptr<Work> IssueP2P(CommOp op, std::string what, int64_t bytes, Launch launch) {
    {
      absl::MutexLock lock(&mu_);
      stats_.Record(op, size_, bytes, false);
    }
    if (!failure_.ok()) {
      return AsyncWork::Done(absl::FailedPreconditionError(
          absl::StrCat("communicator ", name_, " is unusable after an earlier failure: ", failure_.message())));
    }
    if (p2p_done_ == nullptr) {
      p2p_done_ = std::make_shared<CompletionEvent>();
      p2p_done_->device = device_;
      p2p_done_->what = absl::StrCat(what, " in group ", name_);
      p2p_done_->flusher = this;
    }
    p2p_launches_.push_back(std::move(launch));
    return std::make_unique<NcclWork>(p2p_done_, comm_);
  }

  // Launches the pending Send/Recv batch as one NCCL group.
  absl::Status FlushP2P() override {
    if (p2p_done_ == nullptr) return absl::OkStatus();
    std::shared_ptr<CompletionEvent> done = std::move(p2p_done_);
    std::vector<std::function<ncclResult_t(cudaStream_t)>> launches = std::move(p2p_launches_);
    p2p_done_ = nullptr;
    p2p_launches_.clear();
    done->flusher = nullptr;
    done->start = absl::Now();
    absl::Status s = CudaStatus(cudaSetDevice(device_), "cudaSetDevice");
    if (s.ok()) s = CudaStatus(cudaEventCreateWithFlags(&done->event, cudaEventDisableTiming), "cudaEventCreate");
    if (s.ok()) s = CudaStatus(cudaEventRecord(ready_, compute_stream_), "cudaEventRecord");
    if (s.ok()) s = CudaStatus(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent");
    if (s.ok()) s = NcclStatus(ncclGroupStart(), "ncclGroupStart");
    if (s.ok()) {
      for (auto& launch : launches) {
        absl::Status ls = NcclStatus(launch(stream_), done->what);
        if (s.ok()) s = ls;
      }
      absl::Status end = NcclStatus(ncclGroupEnd(), "ncclGroupEnd");
      if (s.ok()) s = end;
    }
    if (s.ok()) s = CudaStatus(cudaEventRecord(done->event, stream_), "cudaEventRecord");
    if (!s.ok()) {
      failure_ = s;
      done->launch_error = s;
      return s;
    }
    absl::MutexLock lock(&mu_);
    outstanding_.push_back(std::move(done));
    return absl::OkStatus();
  }

  // Retires completed operations; aborts the job when the oldest one has run
  // past the timeout (a hung NCCL kernel cannot be cancelled from the host).
  void MonitorLoop() {
    cudaSetDevice(device_);
    const absl::Duration period =
        std::min(absl::Milliseconds(500), std::max(absl::Milliseconds(5), options_.timeout / 20));
    absl::MutexLock lock(&mu_);
    while (!stop_) {
      mu_.AwaitWithTimeout(absl::Condition(&stop_), period);
      while (!outstanding_.empty() && outstanding_.front()->Done()) outstanding_.pop_front();
      if (!outstanding_.empty() && absl::Now() - outstanding_.front()->start > options_.timeout) {
        std::string msg = absl::StrCat(outstanding_.front()->what, " did not finish within ",
                                       absl::FormatDuration(options_.timeout), " on the GPU");
        ncclCommAbort(comm_);
        AbortJob(msg);
      }
    }
  }

  MPI_Comm mpi_comm_;
  const std::string name_;
  const CommOptions options_;
  const int device_;
  int rank_ = 0;
  int size_ = 1;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaStream_t compute_stream_ = 0;  // legacy default stream
  cudaEvent_t ready_ = nullptr;
  void* barrier_buf_ = nullptr;
  std::unique_ptr<CollectiveChecker> checker_;
  std::unique_ptr<CollectiveWatchdog> watchdog_;
  absl::Status failure_;  // caller thread only
  // The Send/Recv batch not yet launched (caller thread only).
  std::shared_ptr<CompletionEvent> p2p_done_;
  std::vector<std::function<ncclResult_t(cudaStream_t)>> p2p_launches_;

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  CommStats stats_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<CompletionEvent>> outstanding_ ABSL_GUARDED_BY(mu_);
  std::thread monitor_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclWorld(const CommOptions& options, int device) {
  std::string reason;
  if (!CudaAvailable(&reason)) return absl::UnavailableError(absl::StrCat("NCCL backend unavailable: ", reason));
  RETURN_IF_ERROR(EnsureMpiInitialized());
  MPI_Comm world;
  RETURN_IF_ERROR(MpiStatus(MPI_Comm_dup(MPI_COMM_WORLD, &world), "MPI_Comm_dup"));
  if (device >= 0) return NcclCommunicator::Create(world, "world", options, device);
  // One GPU per rank on each host: the local rank picks the device.
  MPI_Comm local;
  RETURN_IF_ERROR(MpiStatus(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local),
                            "MPI_Comm_split_type"));
  int local_rank = 0, local_size = 1;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);
  MPI_Comm_free(&local);
  int gpus = 0;
  RETURN_IF_ERROR(CudaStatus(cudaGetDeviceCount(&gpus), "cudaGetDeviceCount"));
  if (local_size > gpus) {
    MPI_Comm_free(&world);
    return absl::UnavailableError(absl::StrCat("NCCL backend needs one GPU per rank: ", local_size,
                                               " ranks on this host, ", gpus, " GPUs"));
  }
  return NcclCommunicator::Create(world, "world", options, local_rank);
}

absl::Status SetNcclComputeStream(Communicator& comm, void* cuda_stream) {
  auto* nccl = dynamic_cast<NcclCommunicator*>(&comm);
  if (nccl == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("communicator ", comm.name(), " is not an NCCL communicator"));
  }
  nccl->set_compute_stream(static_cast<cudaStream_t>(cuda_stream));
  return absl::OkStatus();
}

absl::Status WaitOnStream(Work& work, void* cuda_stream) {
  auto* nccl = dynamic_cast<NcclWork*>(&work);
  if (nccl == nullptr) return absl::InvalidArgumentError("WaitOnStream needs a Work from an NCCL communicator");
  return nccl->WaitOn(cuda_stream);
}

#endif  // ZEROSHARD_HAS_CUDA

}  // namespace zeroshard
