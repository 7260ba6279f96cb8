// The engine's observers (engine/observer.h). Their events are sent where
// they happen: the step's around RunTrainStep (engine_train_step.cc), each
// action's by StepExecutor, the gradient events by OptimizerPhase.
#include <algorithm>

#include "engine/engine_impl.h"

namespace zeroshard {

const char* WaitKindName(WaitKind kind) {
  switch (kind) {
    case WaitKind::kGather:
      return "gather";
    case WaitKind::kReduce:
      return "reduce";
    case WaitKind::kPipelineForward:
      return "pipeline_forward";
    case WaitKind::kPipelineBackward:
      return "pipeline_backward";
    case WaitKind::kOptimizer:
      return "optimizer";
  }
  return "unknown";
}

void EngineImpl::AddObserver(EngineObserver* observer) {
  if (observer == nullptr || std::find(res_.observers.begin(), res_.observers.end(), observer) != res_.observers.end())
    return;
  res_.observers.push_back(observer);
}

void EngineImpl::RemoveObserver(EngineObserver* observer) {
  res_.observers.erase(std::remove(res_.observers.begin(), res_.observers.end(), observer), res_.observers.end());
}

}  // namespace zeroshard
