#include "bench/pipeline/action_breakdown.h"

#include <sys/resource.h>
#include <time.h>

#include <algorithm>

#include "engine/step_program.h"

namespace zeroshard::bench {
namespace {

int BucketOf(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return kBucketForward;
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
      return kBucketBackward;
    case ActionKind::kBackwardWeight:
      return kBucketWeight;
    case ActionKind::kRecompute:
      return kBucketRecompute;
    case ActionKind::kSendAct:
    case ActionKind::kSendGrad:
      return kBucketSend;
    case ActionKind::kRecvAct:
    case ActionKind::kRecvGrad:
      return kBucketRecv;
    default:
      return IsOptimizerPhase(kind) ? kBucketOptimizer : kBucketOther;
  }
}

}  // namespace

const char* BucketName(int bucket) {
  static const char* const kNames[kNumBuckets] = {"F",    "B",    "W",       "recompute", "SEND",
                                                  "RECV", "wait", "between", "optimizer", "other"};
  return bucket >= 0 && bucket < kNumBuckets ? kNames[bucket] : "?";
}

ActionBreakdown::Sample ActionBreakdown::Now() {
  Sample s;
  s.wall = std::chrono::steady_clock::now();
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  s.cpu = ts.tv_sec + 1e-9 * ts.tv_nsec;
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  s.faults = static_cast<double>(ru.ru_minflt);
  return s;
}

void ActionBreakdown::Charge(int bucket, const Sample& from, const Sample& to) {
  current_.wall[bucket] += std::chrono::duration<double>(to.wall - from.wall).count();
  current_.cpu[bucket] += to.cpu - from.cpu;
  current_.faults[bucket] += to.faults - from.faults;
}

void ActionBreakdown::OnStepStart(const StepEvent&) {
  current_ = StepBreakdown();
  in_step_ = true;
  last_end_ = Now();
}

void ActionBreakdown::OnStepEnd(const StepEvent&, const StepResult&) {
  if (!in_step_) return;
  Charge(kBucketBetween, last_end_, Now());  // the last progress and the sends' drain
  steps_.push_back(current_);
  in_step_ = false;
}

void ActionBreakdown::OnActionStart(const ActionEvent&) {
  start_ = Now();
  if (in_step_) Charge(kBucketBetween, last_end_, start_);
  pipeline_wait_ = 0;
}

void ActionBreakdown::OnWait(const WaitEvent& wait) {
  if (wait.what == WaitKind::kPipelineForward || wait.what == WaitKind::kPipelineBackward) {
    pipeline_wait_ += wait.seconds;
  }
}

void ActionBreakdown::OnActionEnd(const ActionEvent& action) {
  const Sample end = Now();
  last_end_ = end;
  if (!in_step_) return;
  const int bucket = BucketOf(action.action->kind);
  Charge(bucket, start_, end);
  // A blocked receive spins or sleeps in MPI: its wall goes to `wait`, and
  // so does its CPU, measured as the same share of the action's CPU.
  if (pipeline_wait_ > 0) {
    const double wall = std::chrono::duration<double>(end.wall - start_.wall).count();
    const double share = wall > 0 ? std::min(1.0, pipeline_wait_ / wall) : 0;
    const double cpu = share * (end.cpu - start_.cpu);
    current_.wall[bucket] -= pipeline_wait_;
    current_.wall[kBucketWait] += pipeline_wait_;
    current_.cpu[bucket] -= cpu;
    current_.cpu[kBucketWait] += cpu;
  }
  if (bucket == kBucketForward) ++current_.forwards;
  if (bucket == kBucketBackward) ++current_.backwards;
  if (bucket == kBucketWeight) ++current_.weights;
}

}  // namespace zeroshard::bench
