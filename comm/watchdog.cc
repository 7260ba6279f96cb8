#include "comm/watchdog.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "comm/fingerprint.h"

namespace zeroshard {

CollectiveWatchdog::CollectiveWatchdog(std::string group, int group_size, absl::Duration timeout, AbortFn abort)
    : group_(std::move(group)), group_size_(group_size), timeout_(timeout), abort_(std::move(abort)) {
  if (timeout_ > absl::ZeroDuration() && timeout_ != absl::InfiniteDuration()) {
    thread_ = std::thread([this] { Loop(); });
  }
}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void CollectiveWatchdog::Begin(const CollectiveFingerprint& fp, bool track_arrivals) {
  absl::MutexLock lock(&mu_);
  active_ = true;
  fired_ = false;
  track_arrivals_ = track_arrivals;
  fp_ = fp;
  start_ = absl::Now();
  if (track_arrivals) arrived_.assign(group_size_, false);
}

void CollectiveWatchdog::MarkArrived(int rank) {
  absl::MutexLock lock(&mu_);
  if (rank >= 0 && rank < group_size_) arrived_[rank] = true;
}

void CollectiveWatchdog::ArrivalsComplete() {
  absl::MutexLock lock(&mu_);
  arrived_.assign(group_size_, true);
}

void CollectiveWatchdog::End() {
  absl::MutexLock lock(&mu_);
  active_ = false;
}

std::string CollectiveWatchdog::TimeoutMessage() const {
  absl::MutexLock lock(&mu_);
  return TimeoutMessageLocked();
}

std::string CollectiveWatchdog::TimeoutMessageLocked() const {
  std::string msg =
      absl::StrCat("collective #", fp_.seq, " ", DescribeCollective(fp_), " in group ", group_, " did not finish within ", absl::FormatDuration(timeout_), "; ");
  if (!track_arrivals_) {
    absl::StrAppend(&msg, "ranks that never arrived: unknown (enable comm.debug_checks to find them)");
    return msg;
  }
  std::vector<int> missing;
  for (int r = 0; r < group_size_; ++r) {
    if (!arrived_[r]) missing.push_back(r);
  }
  if (missing.empty()) {
    absl::StrAppend(&msg, "every rank arrived, the transfer itself stalled");
  } else {
    absl::StrAppend(&msg, missing.size() == 1 ? "rank that never arrived: " : "ranks that never arrived: ",
                    JoinRanks(missing));
  }
  return msg;
}

void CollectiveWatchdog::Loop() {
  // Check often enough that the abort comes within ~1.1 × the timeout.
  const absl::Duration period =
      std::min(absl::Milliseconds(500), std::max(absl::Milliseconds(5), timeout_ / 20));
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    mu_.AwaitWithTimeout(absl::Condition(&stop_), period);
    if (stop_) break;
    if (active_ && !fired_ && absl::Now() - start_ > timeout_) {
      fired_ = true;
      std::string message = TimeoutMessageLocked();
      mu_.Unlock();
      abort_(message);
      mu_.Lock();
    }
  }
}

}  // namespace zeroshard
