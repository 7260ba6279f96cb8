// A Work completed by another thread (the MPI progress thread, a watchdog).
//
// The producer keeps a std::shared_ptr<WorkState> and calls Complete() once;
// the caller holds the AsyncWork. Either side may go away first.
#ifndef ZEROSHARD_COMM_ASYNC_WORK_H_
#define ZEROSHARD_COMM_ASYNC_WORK_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "comm/communicator.h"
#include "comm/fingerprint.h"

namespace zeroshard {

class WorkState;

// A backend that can run queued work on the waiting thread (see
// WorkState::Wait). Must outlive every incomplete WorkState that names it.
class InlineExecutor {
 public:
  virtual ~InlineExecutor() = default;
  // Runs queued operations, in order, on the calling thread while nothing else
  // is executing them, until `state` completes; returns early when it cannot
  // help (another thread is executing, or `state` is not queued).
  virtual void HelpUntilDone(const WorkState* state) = 0;
};

// Completion state shared by producer and waiter. Thread-safe.
class WorkState {
 public:
  // `description` names the operation in Wait's deadline message, e.g.
  // "AllReduce(f32, 1024) in group world".
  explicit WorkState(std::string description) : description_(std::move(description)) {}
  // "collective #N <op> in group <group>", formatted only if needed (the
  // issue path stays free of string formatting).
  WorkState(const CollectiveFingerprint& fp, std::string group) : fp_(fp), group_(std::move(group)) {}

  // Lets Wait() run the operation inline (set before the state is shared).
  void set_executor(InlineExecutor* executor) { executor_ = executor; }

  // The executor calls this when it begins running the operation; only the
  // first call counts. Complete() without it gives a zero-length span.
  void MarkStarted();
  // Records the result and its time, and wakes waiters. Only the first call counts.
  void Complete(absl::Status status);
  // [MarkStarted, Complete] once completed; nullopt before.
  std::optional<WorkSpan> executed_span() const;
  bool IsCompleted() const;
  // The result, or kDeadlineExceeded naming the operation after `timeout`.
  // First lets the executor (if any) run the operation on this thread when
  // nothing else is running it: issue-then-wait then costs no thread
  // hand-off. Then polls (yielding the CPU) for up to kSpin before sleeping,
  // since a sleeping thread pays the scheduler's wake-up latency on top.
  absl::Status Wait(absl::Duration timeout) const;
  static constexpr absl::Duration kSpin = absl::Microseconds(50);
  std::string description() const;

 private:
  const std::string description_;
  const std::optional<CollectiveFingerprint> fp_;
  const std::string group_;
  InlineExecutor* executor_ = nullptr;
  mutable absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> done_flag_{false};  // done_, readable without the lock
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::optional<std::chrono::steady_clock::time_point> started_ ABSL_GUARDED_BY(mu_);
  WorkSpan span_ ABSL_GUARDED_BY(mu_);
};

class AsyncWork : public Work {
 public:
  explicit AsyncWork(std::shared_ptr<WorkState> state) : state_(std::move(state)) {}
  // A Work that is already finished with `status` (e.g. an argument error).
  static std::unique_ptr<Work> Done(absl::Status status);

  bool IsCompleted() override { return state_->IsCompleted(); }
  absl::Status Wait(absl::Duration timeout = absl::InfiniteDuration()) override { return state_->Wait(timeout); }
  std::optional<WorkSpan> ExecutedSpan() override { return state_->executed_span(); }

 private:
  std::shared_ptr<WorkState> state_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_COMM_ASYNC_WORK_H_
