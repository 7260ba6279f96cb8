#include "examples/preemption.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/status_macros.h"

namespace zeroshard {
namespace {

std::atomic<int64_t> g_signal_time_ns{0};
struct sigaction g_old_term, g_old_usr1;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Async-signal-safe: clock_gettime and a lock-free atomic store only.
void OnSignal(int) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t expected = 0;
  const int64_t now = int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
  g_signal_time_ns.compare_exchange_strong(expected, now > 0 ? now : 1);
}

static_assert(std::atomic<int64_t>::is_always_lock_free, "the signal handler stores a lock-free atomic");

}  // namespace

PreemptionSignals::PreemptionSignals() {
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, &g_old_term);
  sigaction(SIGUSR1, &sa, &g_old_usr1);
}

PreemptionSignals::~PreemptionSignals() {
  sigaction(SIGTERM, &g_old_term, nullptr);
  sigaction(SIGUSR1, &g_old_usr1, nullptr);
}

int64_t PreemptionSignals::SignalTimeNs() { return g_signal_time_ns.load(); }

int64_t PreemptionSignals::DeadlineStartNs() {
  const int64_t signal_ns = SignalTimeNs();
  return signal_ns != 0 ? signal_ns : NowNs();
}

absl::StatusOr<bool> PreemptionSignals::AgreePreempted(Communicator& world) const {
  int32_t flag = SignalTimeNs() != 0 ? 1 : 0;
  RETURN_IF_ERROR(world.AllReduce(&flag, 1, DType::kI32, ReduceOp::kMax)->Wait());
  return flag != 0;
}

absl::StatusOr<PreemptionSignals::Boundary> PreemptionSignals::AgreeAtBoundary(Communicator& world,
                                                                              bool writing_here) const {
  // A sum of counts: signalled ranks in the low 16 bits, writing ranks above.
  int32_t counts = (SignalTimeNs() != 0 ? 1 : 0) + (writing_here ? (1 << 16) : 0);
  RETURN_IF_ERROR(world.AllReduce(&counts, 1, DType::kI32, ReduceOp::kSum)->Wait());
  Boundary b;
  b.preempted = (counts & 0xffff) != 0;
  b.writes_finished = (counts >> 16) == 0;
  return b;
}

PreemptDeadline::PreemptDeadline(double deadline_s, int64_t start_ns, std::string what)
    : deadline_ns_(start_ns + static_cast<int64_t>(deadline_s * 1e9)), deadline_s_(deadline_s), what_(std::move(what)) {
  watchdog_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    const auto deadline = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(deadline_ns_));
    if (!cv_.wait_until(lock, deadline, [this] { return disarmed_; })) ExitIfPassed();
  });
}

PreemptDeadline::~PreemptDeadline() {
  Disarm();
  watchdog_.join();
}

void PreemptDeadline::Disarm() {
  std::lock_guard<std::mutex> lock(mu_);
  disarmed_ = true;
  cv_.notify_all();
}

bool PreemptDeadline::Passed() const { return NowNs() >= deadline_ns_; }

void PreemptDeadline::ExitIfPassed() const {
  if (!Passed()) return;
  const std::string line = absl::StrFormat(
      "zeroshard: engine.checkpoint.preempt_deadline_s = %g s passed before %s committed; latest is untouched\n",
      deadline_s_, what_);
  (void)!write(STDERR_FILENO, line.data(), line.size());
  std::_Exit(1);
}

}  // namespace zeroshard
