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
// Arrivals are known only while the fingerprint exchange of comm.debug_checks
// runs (MarkArrived); otherwise the message says the ranks are unknown.
#ifndef ZEROSHARD_COMM_WATCHDOG_H_
#define ZEROSHARD_COMM_WATCHDOG_H_

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "comm/fingerprint.h"

namespace zeroshard {

class CollectiveWatchdog {
 public:
  using AbortFn = std::function<void(const std::string& message)>;

  // `abort` runs on the watchdog thread at most once per operation; in
  // production it does not return. A zero or infinite timeout starts no thread.
  CollectiveWatchdog(std::string group, int group_size, absl::Duration timeout, AbortFn abort);
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

  // The message the abort function gets if the running operation timed out now.
  std::string TimeoutMessage() const;

 private:
  std::string TimeoutMessageLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Loop();

  const std::string group_;
  const int group_size_;
  const absl::Duration timeout_;
  const AbortFn abort_;

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
