#include "comm/watchdog.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "comm/fingerprint.h"

namespace zeroshard {

namespace {

// "1,3", or with hosts "2,3 on zs-h1" / "1 on zs-h0, 3 on zs-h1" (runs of
// ranks on one host); a rank whose host is unknown is listed bare.
std::string RankList(const std::vector<int>& ranks, const RankHostFn& host_of_rank) {
  if (!host_of_rank) return JoinRanks(ranks);
  std::string out;
  size_t i = 0;
  while (i < ranks.size()) {
    const std::string host = host_of_rank(ranks[i]);
    std::vector<int> run;
    while (i < ranks.size() && host_of_rank(ranks[i]) == host) run.push_back(ranks[i++]);
    absl::StrAppend(&out, out.empty() ? "" : ", ", JoinRanks(run), host.empty() ? "" : " on ", host);
  }
  return out;
}

// "rank that never arrived: 3" / "ranks that never arrived: 1,3".
std::string NeverArrived(const std::vector<int>& ranks, const RankHostFn& host_of_rank) {
  return absl::StrCat(ranks.size() == 1 ? "rank that never arrived: " : "ranks that never arrived: ",
                      RankList(ranks, host_of_rank));
}

}  // namespace

std::string DescribeArrivals(int64_t seq, const std::vector<std::optional<int64_t>>& started,
                             const RankHostFn& host_of_rank) {
  std::vector<int> missing, silent;
  for (int r = 0; r < static_cast<int>(started.size()); ++r) {
    if (!started[r].has_value()) {
      silent.push_back(r);
    } else if (*started[r] < seq) {
      missing.push_back(r);
    }
  }
  if (missing.empty() && silent.empty()) return "every rank arrived, the transfer itself stalled";
  std::string out;
  if (!missing.empty()) out = NeverArrived(missing, host_of_rank);
  if (!silent.empty()) {
    absl::StrAppend(&out, out.empty() ? "" : "; ", silent.size() == 1 ? "rank " : "ranks ", RankList(silent, host_of_rank),
                    " did not answer (dead or stuck)");
  }
  return out;
}

CollectiveWatchdog::CollectiveWatchdog(std::string group, int group_size, absl::Duration timeout, AbortFn abort,
                                       PeerQueryFn query, RankHostFn host_of_rank)
    : group_(std::move(group)),
      group_size_(group_size),
      timeout_(timeout),
      abort_(std::move(abort)),
      query_(std::move(query)),
      host_of_rank_(std::move(host_of_rank)) {
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
  Snapshot snapshot;
  {
    absl::MutexLock lock(&mu_);
    snapshot = SnapshotLocked();
  }
  return BuildMessage(snapshot);
}

CollectiveWatchdog::Snapshot CollectiveWatchdog::SnapshotLocked() const {
  return Snapshot{fp_, track_arrivals_, arrived_};
}

std::string CollectiveWatchdog::BuildMessage(const Snapshot& s) const {
  std::string msg = absl::StrCat("collective #", s.fp.seq, " ", DescribeCollective(s.fp), " in group ", group_,
                                 " did not finish within ", absl::FormatDuration(timeout_), "; ");
  if (s.track_arrivals) {
    std::vector<int> missing;
    for (int r = 0; r < group_size_; ++r) {
      if (!s.arrived[r]) missing.push_back(r);
    }
    absl::StrAppend(&msg, missing.empty() ? "every rank arrived, the transfer itself stalled" : NeverArrived(missing, host_of_rank_));
  } else if (query_) {
    absl::StrAppend(&msg, DescribeArrivals(s.fp.seq, query_(), host_of_rank_));
  } else {
    absl::StrAppend(&msg, "ranks that never arrived: unknown (enable comm.debug_checks to find them)");
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
      const Snapshot snapshot = SnapshotLocked();
      // The peer query may take up to its bound: let Begin/End go on meanwhile.
      mu_.Unlock();
      abort_(BuildMessage(snapshot));
      mu_.Lock();
    }
  }
}

}  // namespace zeroshard
