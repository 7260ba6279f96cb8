// Preemption of a training job (docs/resilience.md): SIGTERM or SIGUSR1 on
// any rank makes every rank save at the next step boundary and exit 75.
#ifndef ZEROSHARD_EXAMPLES_PREEMPTION_H_
#define ZEROSHARD_EXAMPLES_PREEMPTION_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "comm/communicator.h"

namespace zeroshard {

// The trainer's exit code after a preemption save committed: preempted, resumable.
inline constexpr int kExitPreempted = 75;

// While alive, SIGTERM and SIGUSR1 only mark this process as preempted (the
// handler stores the time and nothing else); the previous handlers come back
// on destruction. One instance per process.
class PreemptionSignals {
 public:
  PreemptionSignals();
  ~PreemptionSignals();
  PreemptionSignals(const PreemptionSignals&) = delete;
  PreemptionSignals& operator=(const PreemptionSignals&) = delete;

  // Collective over `world` (one AllReduce of one i32): whether any rank got
  // a signal so far. Every rank gets the same answer.
  absl::StatusOr<bool> AgreePreempted(Communicator& world) const;

  // The same one-i32 all-reduce, also carrying whether this rank's
  // asynchronous checkpoint write is still running (`writing_here`), so the
  // ranks learn together whether every write of the save in flight has
  // finished (checkpoint/async_checkpoint.h). Worlds below 65536 ranks.
  struct Boundary {
    bool preempted = false;
    bool writes_finished = true;  // no rank's write is still running
  };
  absl::StatusOr<Boundary> AgreeAtBoundary(Communicator& world, bool writing_here) const;

  // steady_clock nanoseconds when this rank got its first signal; 0: none.
  static int64_t SignalTimeNs();
  // Where a preemption's deadline counts from: the first signal on this
  // rank, or now on a rank that learned of it only through the agreement.
  static int64_t DeadlineStartNs();
};

// The preemption save's deadline: a watchdog thread ends the process with
// exit code 1 once `deadline_s` seconds passed since `start_ns` (steady_clock
// ns) unless Disarm() came first. Ending the process before the commit's
// rename leaves the previous steps and `latest` untouched
// (checkpoint/checkpoint_root.h).
class PreemptDeadline {
 public:
  PreemptDeadline(double deadline_s, int64_t start_ns, std::string what);
  ~PreemptDeadline();  // disarms
  PreemptDeadline(const PreemptDeadline&) = delete;
  PreemptDeadline& operator=(const PreemptDeadline&) = delete;

  // Whether the deadline has passed (the watchdog may not have fired yet).
  bool Passed() const;
  // Ends the process as the watchdog does if the deadline has passed.
  void ExitIfPassed() const;
  void Disarm();

 private:
  const int64_t deadline_ns_;
  const double deadline_s_;
  const std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool disarmed_ = false;
  std::thread watchdog_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_EXAMPLES_PREEMPTION_H_
