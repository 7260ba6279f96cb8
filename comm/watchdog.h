// Bounds how long one communicator's operation may run (comm.timeout).
//
// The progress thread brackets each operation with Begin()/End(). A watchdog
// thread wakes a few times per timeout; when an operation has run longer than
// the timeout it builds
//   "collective #7 AllReduce(f32, 1024) in group world did not finish within
//    2s; ranks that never arrived: 2"
// and hands it to the abort function, which in production prints it and calls
// MPI_Abort (mpi_env.h: AbortJob): the one place the library ends the process,
// because a rank stuck inside MPI cannot be unblocked any other way.
//
// Who never arrived comes from the fingerprint exchange of comm.debug_checks
// (MarkArrived) when it runs; otherwise from the peer query, if the backend
// gave one (MPI: ArrivalProbe asks every other rank which collective it last
// started; a rank that does not answer in time is named as "did not answer
// (dead or stuck)"). Without either the message says the ranks are unknown.
#ifndef ZEROSHARD_COMM_WATCHDOG_H_
#define ZEROSHARD_COMM_WATCHDOG_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "comm/fingerprint.h"

namespace zeroshard {

// The reason part of a timeout message, from what each rank of the group last
// started (entry r: rank r's sequence number, nullopt if it did not answer):
// ranks below `seq` never arrived. E.g. "rank that never arrived: 3",
// "ranks that never arrived: 1,3; rank 2 did not answer (dead or stuck)",
// "every rank arrived, the transfer itself stalled".
// With `host_of_rank` (group rank -> host name, "" when unknown) each list
// names the ranks' hosts: "ranks 2,3 on zs-h1 did not answer (dead or
// stuck)", "rank that never arrived: 1 on zs-h0, 3 on zs-h1".
using RankHostFn = std::function<std::string(int rank)>;
std::string DescribeArrivals(int64_t seq, const std::vector<std::optional<int64_t>>& started,
                             const RankHostFn& host_of_rank = nullptr);

class CollectiveWatchdog {
 public:
  using AbortFn = std::function<void(const std::string& message)>;
  // Returns what every rank of the group last started (DescribeArrivals'
  // `started`, this rank included); may block for a bounded time.
  using PeerQueryFn = std::function<std::vector<std::optional<int64_t>>()>;

  // `abort` runs on the watchdog thread at most once per operation; in
  // production it does not return. A zero or infinite timeout starts no thread.
  // `query` (may be empty) runs on the watchdog thread before `abort` when
  // arrivals are not tracked. `host_of_rank` (may be empty) names the hosts
  // of the ranks the message lists.
  CollectiveWatchdog(std::string group, int group_size, absl::Duration timeout, AbortFn abort,
                     PeerQueryFn query = nullptr, RankHostFn host_of_rank = nullptr);
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // Starts timing collective `fp` (named "collective #7 AllReduce(f32, 1024)"
  // in the message). With `track_arrivals`, ranks count as missing until
  // MarkArrived(rank).
  void Begin(const CollectiveFingerprint& fp, bool track_arrivals);
  void MarkArrived(int rank);
  // All ranks have arrived; what remains is the transfer itself.
  void ArrivalsComplete();
  void End();

  // The message the abort function gets if the running operation timed out
  // now (runs the peer query when the abort would).
  std::string TimeoutMessage() const;

 private:
  // What the message is built from, copied under mu_.
  struct Snapshot {
    CollectiveFingerprint fp;
    bool track_arrivals = false;
    std::vector<bool> arrived;
  };
  Snapshot SnapshotLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs the peer query if needed: call without mu_.
  std::string BuildMessage(const Snapshot& s) const;
  void Loop();

  const std::string group_;
  const int group_size_;
  const absl::Duration timeout_;
  const AbortFn abort_;
  const PeerQueryFn query_;
  const RankHostFn host_of_rank_;

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool active_ ABSL_GUARDED_BY(mu_) = false;
  bool fired_ ABSL_GUARDED_BY(mu_) = false;
  bool track_arrivals_ ABSL_GUARDED_BY(mu_) = false;
  CollectiveFingerprint fp_ ABSL_GUARDED_BY(mu_);
  absl::Time start_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> arrived_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_COMM_WATCHDOG_H_
