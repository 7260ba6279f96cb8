#include "comm/async_work.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace zeroshard {

void WorkState::Complete(absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (done_) return;
  status_ = std::move(status);
  done_ = true;
}

bool WorkState::IsCompleted() const {
  absl::MutexLock lock(&mu_);
  return done_;
}

absl::Status WorkState::Wait(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  if (!mu_.AwaitWithTimeout(absl::Condition(&done_), timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat(description_, " did not finish within ", absl::FormatDuration(timeout)));
  }
  return status_;
}

std::unique_ptr<Work> AsyncWork::Done(absl::Status status) {
  auto state = std::make_shared<WorkState>("finished operation");
  state->Complete(std::move(status));
  return std::make_unique<AsyncWork>(std::move(state));
}

}  // namespace zeroshard
