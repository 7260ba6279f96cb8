#include "comm/async_work.h"

#include <sched.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace zeroshard {

void WorkState::MarkStarted() {
  const auto now = std::chrono::steady_clock::now();
  absl::MutexLock lock(&mu_);
  if (!started_.has_value()) started_ = now;
}

void WorkState::Complete(absl::Status status) {
  const auto now = std::chrono::steady_clock::now();
  absl::MutexLock lock(&mu_);
  if (done_) return;
  span_.start = started_.value_or(now);
  span_.end = now;
  status_ = std::move(status);
  done_ = true;
  done_flag_.store(true, std::memory_order_release);
}

std::optional<WorkSpan> WorkState::executed_span() const {
  absl::MutexLock lock(&mu_);
  if (!done_) return std::nullopt;
  return span_;
}

bool WorkState::IsCompleted() const { return done_flag_.load(std::memory_order_acquire); }

absl::Status WorkState::Wait(absl::Duration timeout) const {
  if (executor_ != nullptr && !IsCompleted()) executor_->HelpUntilDone(this);
  const absl::Time spin_until = absl::Now() + std::min(timeout, kSpin);
  while (!done_flag_.load(std::memory_order_acquire) && absl::Now() < spin_until) sched_yield();
  absl::MutexLock lock(&mu_);
  if (!mu_.AwaitWithTimeout(absl::Condition(&done_), timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat(description(), " did not finish within ", absl::FormatDuration(timeout)));
  }
  return status_;
}

std::string WorkState::description() const {
  if (!fp_) return description_;
  return absl::StrCat("collective #", fp_->seq, " ", DescribeCollective(*fp_), " in group ", group_);
}

std::unique_ptr<Work> AsyncWork::Done(absl::Status status) {
  auto state = std::make_shared<WorkState>("finished operation");
  state->Complete(std::move(status));
  return std::make_unique<AsyncWork>(std::move(state));
}

}  // namespace zeroshard
