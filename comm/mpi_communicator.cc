#include "comm/mpi_communicator.h"

#include <sched.h>
#include <sys/prctl.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "comm/arrival_probe.h"
#include "comm/async_work.h"
#include "comm/collective_checker.h"
#include "comm/fingerprint.h"
#include "comm/host_topology.h"
#include "comm/watchdog.h"
#include "core/status_macros.h"

namespace zeroshard {
namespace {

constexpr int kMaxTag = 32767;  // the MPI standard's minimum MPI_TAG_UB
// Scheduling of the progress thread (see ProgressLoop).
// A fresh operation is left this long to a caller that may be about to Wait
// on it (and run it inline).
constexpr absl::Duration kInlineGrace = absl::Microseconds(20);
// While the communicator is active, the idle progress thread looks at the
// queue this often without being signalled...
constexpr absl::Duration kIdleTick = absl::Milliseconds(1);
// ...and after this long without an issue it sleeps until signalled.
constexpr absl::Duration kActiveWindow = absl::Milliseconds(100);

// f32 staging for f16/bf16 reductions, reused across operations (it only
// grows) and accounted as kCommBuffers. Progress thread only.
class F32Staging {
 public:
  explicit F32Staging(MemoryTracker* tracker) : tracker_(tracker) {}
  ~F32Staging() {
    if (tracker_) tracker_->Freed(MemoryCategory::kCommBuffers, Bytes());
  }
  // At least n floats, uninitialised.
  float* Get(size_t n) {
    if (n > capacity_) {
      if (tracker_) tracker_->Freed(MemoryCategory::kCommBuffers, Bytes());
      data_.reset(new float[n]);
      capacity_ = n;
      if (tracker_) tracker_->Allocated(MemoryCategory::kCommBuffers, Bytes());
    }
    return data_.get();
  }

 private:
  int64_t Bytes() const { return static_cast<int64_t>(capacity_ * sizeof(float)); }

  MemoryTracker* tracker_;
  std::unique_ptr<float[]> data_;
  size_t capacity_ = 0;
};

bool IsHalf(DType dtype) { return dtype == DType::kF16 || dtype == DType::kBF16; }

MPI_Op MpiOpOf(ReduceOp op) { return op == ReduceOp::kMax ? MPI_MAX : MPI_SUM; }

// The reduction type MPI sees: f16/bf16 are reduced as f32.
MPI_Datatype MpiReduceType(DType dtype) { return dtype == DType::kI32 ? MPI_INT32_T : MPI_FLOAT; }

void DivideInPlace(void* buf, int64_t n, DType dtype, int divisor) {
  if (dtype == DType::kI32) {
    auto* p = static_cast<int32_t*>(buf);
    for (int64_t i = 0; i < n; ++i) p[i] /= divisor;
  } else {
    auto* p = static_cast<float*>(buf);
    const float d = static_cast<float>(divisor);
    for (int64_t i = 0; i < n; ++i) p[i] /= d;
  }
}

class MpiCommunicator : public Communicator, public InlineExecutor {
 public:
  // Takes ownership of `comm`.
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(MPI_Comm comm, const std::string& name,
                                                              const CommOptions& options) {
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    std::unique_ptr<CollectiveChecker> checker;
    if (options.debug_checks) {
      auto checker_or = CollectiveChecker::Create(comm, name);
      if (!checker_or.ok()) {
        MPI_Comm_free(&comm);
        return checker_or.status();
      }
      checker = std::move(checker_or).value();
    }
    auto probe_or = ArrivalProbe::Create(comm);
    if (!probe_or.ok()) {
      checker.reset();
      MPI_Comm_free(&comm);
      return probe_or.status();
    }
    return std::unique_ptr<Communicator>(
        new MpiCommunicator(comm, name, options, std::move(checker), std::move(probe_or).value()));
  }

  ~MpiCommunicator() override {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    progress_thread_.join();
    watchdog_.reset();
    checker_.reset();
    probe_.reset();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  Device device() const override { return Device::kCpu; }

  std::unique_ptr<Work> AllGather(const void* in, void* out, int64_t count, DType dtype) override {
    absl::Status s = CheckBuffers(count, dtype, size_, {in, out});
    if (!s.ok()) return AsyncWork::Done(s);
    const size_t bytes = count * DTypeSize(dtype);
    const bool in_place = in == static_cast<const char*>(out) + rank_ * bytes;
    CollectiveFingerprint fp{0, CommOp::kAllGather, count, dtype, -1, ReduceOp::kSum};
    return IssueCollective(fp, bytes, false, [=] {
      MPI_Datatype t = MpiRawType(dtype);
      return MpiStatus(MPI_Allgather(in_place ? MPI_IN_PLACE : in, static_cast<int>(count), t, out,
                                     static_cast<int>(count), t, comm_),
                       "MPI_Allgather");
    });
  }

  std::unique_ptr<Work> AllToAll(const void* in, void* out, int64_t count, DType dtype) override {
    absl::Status s = CheckBuffers(count, dtype, size_, {in, out});
    const int64_t bytes = count * static_cast<int64_t>(DTypeSize(dtype));
    if (s.ok()) s = CheckAllToAllDisjoint(in, out, bytes * size_);
    if (!s.ok()) return AsyncWork::Done(s);
    CollectiveFingerprint fp{0, CommOp::kAllToAll, count, dtype, -1, ReduceOp::kSum};
    return IssueCollective(fp, bytes, false, [=] {
      MPI_Datatype t = MpiRawType(dtype);
      const int c = static_cast<int>(count);
      return MpiStatus(MPI_Alltoall(in, c, t, out, c, t, comm_), "MPI_Alltoall");
    });
  }

  std::unique_ptr<Work> ReduceScatter(const void* in, void* out, int64_t count, DType dtype,
                                      ReduceOp op) override {
    absl::Status s = CheckBuffers(count, dtype, size_, {in, out});
    if (s.ok()) s = CheckReducible(dtype);
    if (!s.ok()) return AsyncWork::Done(s);
    CollectiveFingerprint fp{0, CommOp::kReduceScatter, count, dtype, -1, op};
    return IssueCollective(fp, count * DTypeSize(dtype), false, [=] {
      const int c = static_cast<int>(count);
      if (!IsHalf(dtype)) {
        RETURN_IF_ERROR(MpiStatus(
            MPI_Reduce_scatter_block(in, out, c, MpiReduceType(dtype), MpiOpOf(op), comm_),
            "MPI_Reduce_scatter_block"));
        if (op == ReduceOp::kAvg) DivideInPlace(out, count, dtype, size_);
        return absl::OkStatus();
      }
      // One staging block: [0, n·count) widened input, then count outputs.
      float* wide_in = staging_.Get(static_cast<size_t>(count) * (size_ + 1));
      float* wide_out = wide_in + count * size_;
      ConvertHalfToF32(static_cast<const uint16_t*>(in), wide_in, count * size_, dtype);
      RETURN_IF_ERROR(
          MpiStatus(MPI_Reduce_scatter_block(wide_in, wide_out, c, MPI_FLOAT, MpiOpOf(op), comm_),
                    "MPI_Reduce_scatter_block"));
      if (op == ReduceOp::kAvg) DivideInPlace(wide_out, count, DType::kF32, size_);
      ConvertF32ToHalf(wide_out, static_cast<uint16_t*>(out), count, dtype);
      return absl::OkStatus();
    });
  }

  std::unique_ptr<Work> AllReduce(void* buf, int64_t count, DType dtype, ReduceOp op) override {
    absl::Status s = CheckBuffers(count, dtype, 1, {buf});
    if (s.ok()) s = CheckReducible(dtype);
    if (!s.ok()) return AsyncWork::Done(s);
    CollectiveFingerprint fp{0, CommOp::kAllReduce, count, dtype, -1, op};
    return IssueCollective(fp, count * DTypeSize(dtype), false, [=] {
      const int c = static_cast<int>(count);
      if (!IsHalf(dtype)) {
        RETURN_IF_ERROR(MpiStatus(MPI_Allreduce(MPI_IN_PLACE, buf, c, MpiReduceType(dtype), MpiOpOf(op), comm_),
                                  "MPI_Allreduce"));
        if (op == ReduceOp::kAvg) DivideInPlace(buf, count, dtype, size_);
        return absl::OkStatus();
      }
      float* wide = staging_.Get(static_cast<size_t>(count));
      ConvertHalfToF32(static_cast<const uint16_t*>(buf), wide, count, dtype);
      RETURN_IF_ERROR(
          MpiStatus(MPI_Allreduce(MPI_IN_PLACE, wide, c, MPI_FLOAT, MpiOpOf(op), comm_), "MPI_Allreduce"));
      if (op == ReduceOp::kAvg) DivideInPlace(wide, count, DType::kF32, size_);
      ConvertF32ToHalf(wide, static_cast<uint16_t*>(buf), count, dtype);
      return absl::OkStatus();
    });
  }

  std::unique_ptr<Work> Broadcast(void* buf, int64_t count, DType dtype, int root) override {
    absl::Status s = CheckBuffers(count, dtype, 1, {buf});
    if (s.ok()) s = CheckRank(root, "root");
    if (!s.ok()) return AsyncWork::Done(s);
    CollectiveFingerprint fp{0, CommOp::kBroadcast, count, dtype, root, ReduceOp::kSum};
    return IssueCollective(fp, count * DTypeSize(dtype), root == rank_, [=] {
      return MpiStatus(MPI_Bcast(buf, static_cast<int>(count), MpiRawType(dtype), root, comm_), "MPI_Bcast");
    });
  }

  std::unique_ptr<Work> Send(const void* buf, int64_t count, DType dtype, int peer, int tag) override {
    absl::Status s = CheckPointToPoint(buf, count, dtype, peer, tag);
    if (!s.ok()) return AsyncWork::Done(s);
    std::string what = absl::StrCat("Send(", DTypeName(dtype), ", ", count, ") to rank ", peer, " tag ", tag);
    return IssuePointToPoint(CommOp::kSend, std::move(what), count * DTypeSize(dtype), [=](MPI_Request* req) {
      return MpiStatus(MPI_Isend(buf, static_cast<int>(count), MpiRawType(dtype), peer, tag, comm_, req),
                       "MPI_Isend");
    });
  }

  std::unique_ptr<Work> Recv(void* buf, int64_t count, DType dtype, int peer, int tag) override {
    absl::Status s = CheckPointToPoint(buf, count, dtype, peer, tag);
    if (!s.ok()) return AsyncWork::Done(s);
    std::string what = absl::StrCat("Recv(", DTypeName(dtype), ", ", count, ") from rank ", peer, " tag ", tag);
    return IssuePointToPoint(CommOp::kRecv, std::move(what), count * DTypeSize(dtype), [=](MPI_Request* req) {
      return MpiStatus(MPI_Irecv(buf, static_cast<int>(count), MpiRawType(dtype), peer, tag, comm_, req),
                       "MPI_Irecv");
    });
  }

  std::unique_ptr<Work> Barrier() override {
    CollectiveFingerprint fp{0, CommOp::kBarrier, 0, DType::kF32, -1, ReduceOp::kSum};
    return IssueCollective(fp, 0, false, [=] { return MpiStatus(MPI_Barrier(comm_), "MPI_Barrier"); });
  }

  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key, const std::string& name) override {
    if (color < 0) {
      return absl::InvalidArgumentError(absl::StrCat("Split color ", color, " must be >= 0"));
    }
    auto result = std::make_shared<absl::StatusOr<std::unique_ptr<Communicator>>>(
        absl::InternalError("Split did not run"));
    CollectiveFingerprint fp{0, CommOp::kSplit, 0, DType::kF32, -1, ReduceOp::kSum};
    CommOptions options = options_;
    std::unique_ptr<Work> work = IssueCollective(fp, 0, false, [=] {
      MPI_Comm sub;
      RETURN_IF_ERROR(MpiStatus(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split"));
      *result = Create(sub, name, options);
      return result->status();
    });
    RETURN_IF_ERROR(work->Wait());
    return std::move(*result);
  }

  CommStats Stats() const override {
    absl::MutexLock lock(&mu_);
    return stats_;
  }

 private:
  struct Task {
    std::shared_ptr<WorkState> state;
    std::string what;                                  // p2p only: "Send(f32, 4) to rank 1 tag 0"
    std::optional<CollectiveFingerprint> fingerprint;  // collectives only
    std::function<absl::Status()> run;                 // collectives: blocking MPI call
    std::function<absl::Status(MPI_Request*)> post;    // p2p: posts a nonblocking call
    absl::Time issued;
  };
  struct PendingRequest {
    MPI_Request request;
    std::shared_ptr<WorkState> state;
    std::string what;
    absl::Time start;
  };

  MpiCommunicator(MPI_Comm comm, std::string name, CommOptions options, std::unique_ptr<CollectiveChecker> checker,
                  std::unique_ptr<ArrivalProbe> probe)
      : comm_(comm),
        name_(std::move(name)),
        options_(options),
        checker_(std::move(checker)),
        probe_(std::move(probe)) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    // Without debug_checks, a timed-out rank asks its peers what they started.
    const absl::Duration bound = ArrivalQueryBound(options_.timeout);
    watchdog_ = std::make_unique<CollectiveWatchdog>(
        name_, size_, options_.timeout, [](const std::string& msg) { AbortJob(msg); },
        [probe = probe_.get(), bound] { return probe->QueryStarted(bound); },
        [world = WorldRanks()](int r) {
          return r >= 0 && r < static_cast<int>(world.size()) ? DetectedHostName(world[r]) : std::string();
        });
    progress_thread_ = std::thread([this] { ProgressLoop(); });
  }

  // World rank of each rank of comm_ (the watchdog names their hosts).
  std::vector<int> WorldRanks() const {
    std::vector<int> mine(size_), world(size_, MPI_UNDEFINED);
    for (int r = 0; r < size_; ++r) mine[r] = r;
    MPI_Group group, world_group;
    MPI_Comm_group(comm_, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    MPI_Group_translate_ranks(group, size_, mine.data(), world_group, world.data());
    MPI_Group_free(&group);
    MPI_Group_free(&world_group);
    return world;
  }

  absl::Status CheckBuffers(int64_t count, DType dtype, int count_multiplier, std::vector<const void*> bufs) const {
    if (count < 0) return absl::InvalidArgumentError(absl::StrCat("element count ", count, " must be >= 0"));
    if (count * count_multiplier > INT_MAX) {
      return absl::InvalidArgumentError(absl::StrCat("element count ", count, " x ", count_multiplier,
                                                     " exceeds MPI's limit of ", INT_MAX, " per call"));
    }
    if (count > 0) {
      for (const void* b : bufs) {
        if (b == nullptr) return absl::InvalidArgumentError(absl::StrCat("null buffer for ", count, " elements"));
      }
    }
    return absl::OkStatus();
  }

  static absl::Status CheckReducible(DType dtype) {
    if (dtype == DType::kU16 || dtype == DType::kI8) {
      return absl::InvalidArgumentError(
          absl::StrCat("dtype ", DTypeName(dtype), " cannot be reduced; expected f32, f16, bf16 or i32"));
    }
    return absl::OkStatus();
  }

  // MPI forbids aliased send and receive buffers; overlap would corrupt
  // blocks silently, so it is an argument error. `bytes`: each buffer's size.
  static absl::Status CheckAllToAllDisjoint(const void* in, const void* out, int64_t bytes) {
    const auto a = reinterpret_cast<uintptr_t>(in), b = reinterpret_cast<uintptr_t>(out);
    if (bytes > 0 && a < b + bytes && b < a + bytes) {
      return absl::InvalidArgumentError("AllToAll input and output overlap; they must be separate buffers");
    }
    return absl::OkStatus();
  }

  absl::Status CheckRank(int r, const char* what) const {
    if (r < 0 || r >= size_) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", r, " is not a rank of group ", name_, " (size ", size_, ")"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckPointToPoint(const void* buf, int64_t count, DType dtype, int peer, int tag) const {
    RETURN_IF_ERROR(CheckBuffers(count, dtype, 1, {buf}));
    RETURN_IF_ERROR(CheckRank(peer, "peer"));
    if (tag < 0 || tag > kMaxTag) {
      return absl::InvalidArgumentError(absl::StrCat("tag ", tag, " is outside [0, ", kMaxTag, "]"));
    }
    return absl::OkStatus();
  }

  std::unique_ptr<Work> IssueCollective(CollectiveFingerprint fp, int64_t bytes_per_rank, bool is_root,
                                        std::function<absl::Status()> run) {
    Task task;
    task.run = std::move(run);
    absl::MutexLock lock(&mu_);
    fp.seq = ++seq_;
    task.issued = absl::Now();
    task.state = std::make_shared<WorkState>(fp, name_);
    task.state->set_executor(this);
    task.fingerprint = fp;
    stats_.Record(fp.op, size_, bytes_per_rank, is_root);
    auto work = std::make_unique<AsyncWork>(task.state);
    Enqueue(std::move(task));
    return work;
  }

  std::unique_ptr<Work> IssuePointToPoint(CommOp op, std::string what, int64_t bytes,
                                          std::function<absl::Status(MPI_Request*)> post) {
    Task task;
    task.post = std::move(post);
    task.issued = absl::Now();
    task.state = std::make_shared<WorkState>(absl::StrCat(what, " in group ", name_));
    task.state->set_executor(this);
    task.what = std::move(what);
    absl::MutexLock lock(&mu_);
    stats_.Record(op, size_, bytes, false);
    auto work = std::make_unique<AsyncWork>(task.state);
    Enqueue(std::move(task));
    return work;
  }

  // Queues `task` and decides whether to signal the progress thread. A lone
  // operation is not signalled: its caller usually waits at once and runs it
  // inline (no hand-off, no extra runnable thread on a busy host); if the
  // caller computes instead, the progress thread's next tick (<= kIdleTick)
  // starts it. A second queued operation, or a progress thread in deep sleep,
  // is signalled at once.
  void Enqueue(Task task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!queue_.empty() || deep_sleep_) wake_ = true;
    last_issue_ = task.issued;
    queue_.push_back(std::move(task));
  }

  // The executor token (executing_) makes one thread at a time run tasks,
  // poll requests and touch the progress-owned state below: the progress
  // thread, or a caller inside Work::Wait (HelpUntilDone).
  bool Signalled() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !executing_ && (wake_ || stop_ || pending_count_ > 0);
  }
  bool SignalledIgnoringPending() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !executing_ && (wake_ || stop_);
  }

  void ProgressLoop() {
    // Short timed waits (ticks, p2p polling) should not be stretched by the
    // default 50 µs timer slack.
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    absl::Duration pause = absl::Microseconds(1);
    while (true) {
      std::optional<Task> task;
      {
        absl::MutexLock lock(&mu_);
        bool signalled = wake_ && !executing_;
        if (queue_.empty() || executing_) {
          if (pending_count_ > 0) {
            // Requests in flight: poll them with a growing pause.
            signalled = mu_.AwaitWithTimeout(
                absl::Condition(this, &MpiCommunicator::SignalledIgnoringPending), pause);
          } else if (absl::Now() - last_issue_ < kActiveWindow) {
            signalled = mu_.AwaitWithTimeout(absl::Condition(this, &MpiCommunicator::Signalled), kIdleTick);
          } else {
            deep_sleep_ = true;
            mu_.Await(absl::Condition(this, &MpiCommunicator::Signalled));
            deep_sleep_ = false;
            signalled = true;
          }
        }
        if (executing_) {
          // A waiter is running the queue; back off instead of spinning.
          pause = std::min(pause * 2, absl::Microseconds(500));
          continue;
        }
        wake_ = false;
        if (stop_ && queue_.empty() && pending_count_ == 0) return;
        // On a tick, leave a fresh operation to its caller for kInlineGrace.
        bool take = !queue_.empty();
        if (take && !signalled && !stop_) {
          const absl::Duration age = absl::Now() - queue_.front().issued;
          if (age < kInlineGrace) {
            mu_.AwaitWithTimeout(absl::Condition(this, &MpiCommunicator::SignalledIgnoringPending),
                                 kInlineGrace - age);
            continue;
          }
        }
        if (!take && pending_count_ == 0) continue;
        executing_ = true;
        if (take) {
          task = std::move(queue_.front());
          queue_.pop_front();
        }
      }
      const bool progressed = PollPending();
      if (task) Execute(*task);
      {
        absl::MutexLock lock(&mu_);
        executing_ = false;
      }
      pause = (task || progressed) ? absl::Microseconds(1) : std::min(pause * 2, absl::Microseconds(500));
    }
  }

  void HelpUntilDone(const WorkState* state) override {
    while (!state->IsCompleted()) {
      std::optional<Task> task;
      {
        absl::MutexLock lock(&mu_);
        if (executing_ || queue_.empty()) return;
        executing_ = true;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      Execute(*task);
      PollPending();
      absl::MutexLock lock(&mu_);
      executing_ = false;
    }
  }

  void Execute(Task& task) {
    task.state->MarkStarted();
    if (!failure_.ok()) {
      task.state->Complete(absl::FailedPreconditionError(
          absl::StrCat("communicator ", name_, " is unusable after an earlier failure: ", failure_.message())));
      return;
    }
    if (task.post) {
      PendingRequest p{MPI_REQUEST_NULL, task.state, std::move(task.what), absl::Now()};
      absl::Status s = task.post(&p.request);
      if (!s.ok()) {
        failure_ = s;
        task.state->Complete(s);
        return;
      }
      pending_.push_back(std::move(p));
      SetPendingCount();
      PollPending();
      return;
    }
    const bool check = checker_ != nullptr && task.fingerprint.has_value();
    probe_->RecordStarted(task.fingerprint->seq);
    watchdog_->Begin(*task.fingerprint, check);
    absl::Status s;
    if (check) s = checker_->Check(*task.fingerprint, watchdog_.get());
    if (s.ok()) s = task.run();
    watchdog_->End();
    if (!s.ok()) failure_ = s;
    task.state->Complete(s);
  }

  // Completes finished point-to-point requests; true if any finished.
  bool PollPending() {
    bool progressed = false;
    const absl::Time now = absl::Now();
    for (size_t i = 0; i < pending_.size();) {
      int flag = 0;
      absl::Status s = MpiStatus(MPI_Test(&pending_[i].request, &flag, MPI_STATUS_IGNORE), "MPI_Test");
      if (s.ok() && !flag) {
        if (options_.timeout != absl::InfiniteDuration() && now - pending_[i].start > options_.timeout) {
          AbortJob(absl::StrCat(pending_[i].what, " in group ", name_, " did not finish within ",
                                absl::FormatDuration(options_.timeout)));
        }
        ++i;
        continue;
      }
      pending_[i].state->Complete(s);
      pending_.erase(pending_.begin() + i);
      progressed = true;
    }
    if (progressed) SetPendingCount();
    return progressed;
  }

  void SetPendingCount() {
    absl::MutexLock lock(&mu_);
    pending_count_ = pending_.size();
  }

  MPI_Comm comm_;
  const std::string name_;
  const CommOptions options_;
  int rank_ = 0;
  int size_ = 1;
  std::unique_ptr<CollectiveChecker> checker_;
  std::unique_ptr<ArrivalProbe> probe_;  // outlives watchdog_, which queries it
  std::unique_ptr<CollectiveWatchdog> watchdog_;

  mutable absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  CommStats stats_ ABSL_GUARDED_BY(mu_);
  bool executing_ ABSL_GUARDED_BY(mu_) = false;  // the executor token
  bool wake_ ABSL_GUARDED_BY(mu_) = false;       // the progress thread is wanted now
  bool deep_sleep_ ABSL_GUARDED_BY(mu_) = false;  // it waits without ticks
  absl::Time last_issue_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  size_t pending_count_ ABSL_GUARDED_BY(mu_) = 0;  // pending_.size()

  // Touched only by the holder of the executor token.
  F32Staging staging_{options_.tracker};
  std::vector<PendingRequest> pending_;
  absl::Status failure_;
  std::thread progress_thread_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateMpiCommunicator(MPI_Comm group, const std::string& name,
                                                                    const CommOptions& options) {
  RETURN_IF_ERROR(EnsureMpiInitialized());
  MPI_Comm dup;
  RETURN_IF_ERROR(MpiStatus(MPI_Comm_dup(group, &dup), "MPI_Comm_dup"));
  return MpiCommunicator::Create(dup, name, options);
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateMpiWorld(const CommOptions& options) {
  RETURN_IF_ERROR(EnsureMpiInitialized());
  return CreateMpiCommunicator(MPI_COMM_WORLD, "world", options);
}

}  // namespace zeroshard
