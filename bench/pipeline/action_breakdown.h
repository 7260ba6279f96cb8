// ActionBreakdown: an engine observer that splits each training step of
// one rank into what its actions cost, by kind: wall time outside waits,
// the thread's CPU time, minor page faults, and the time blocked for a
// neighbour or a collective. The time between actions (the transport's
// progress, freeing completed sends) is its own bucket. Per step; the
// bench takes medians over steps.
#ifndef ZEROSHARD_BENCH_PIPELINE_ACTION_BREAKDOWN_H_
#define ZEROSHARD_BENCH_PIPELINE_ACTION_BREAKDOWN_H_

#include <array>
#include <chrono>
#include <vector>

#include "engine/engine.h"
#include "engine/observer.h"

namespace zeroshard::bench {

// What a step's time is split into.
enum Bucket : int {
  kBucketForward,      // FORWARD minus its pipeline wait
  kBucketBackward,     // BACKWARD or BACKWARD_INPUT minus its pipeline wait
  kBucketWeight,       // BACKWARD_WEIGHT
  kBucketRecompute,    // RECOMPUTE
  kBucketSend,         // SEND_ACT, SEND_GRAD: posting
  kBucketRecv,         // RECV_ACT, RECV_GRAD: posting
  kBucketWait,         // blocked for a neighbour's activations or gradients
  kBucketBetween,      // between actions: transfer progress, freed sends
  kBucketOptimizer,    // the optimizer phase
  kBucketOther,        // BEGIN_STEP, gathers, reductions
  kNumBuckets,
};
const char* BucketName(int bucket);  // "F", "B", "W", ...

struct StepBreakdown {
  std::array<double, kNumBuckets> wall{};    // seconds
  std::array<double, kNumBuckets> cpu{};     // seconds of this thread
  std::array<double, kNumBuckets> faults{};  // minor page faults
  int forwards = 0, backwards = 0, weights = 0;  // actions per step
};

class ActionBreakdown : public EngineObserver {
 public:
  void OnStepStart(const StepEvent& step) override;
  void OnStepEnd(const StepEvent& step, const StepResult& result) override;
  void OnActionStart(const ActionEvent& action) override;
  void OnActionEnd(const ActionEvent& action) override;
  void OnWait(const WaitEvent& wait) override;

  const std::vector<StepBreakdown>& steps() const { return steps_; }
  void Clear() { steps_.clear(); }

 private:
  struct Sample {
    std::chrono::steady_clock::time_point wall;
    double cpu = 0;
    double faults = 0;
  };
  static Sample Now();
  void Charge(int bucket, const Sample& from, const Sample& to);

  StepBreakdown current_;
  Sample last_end_{};
  Sample start_{};
  double pipeline_wait_ = 0;  // of the action running
  bool in_step_ = false;
  std::vector<StepBreakdown> steps_;
};

}  // namespace zeroshard::bench

#endif  // ZEROSHARD_BENCH_PIPELINE_ACTION_BREAKDOWN_H_
