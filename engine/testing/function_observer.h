// FunctionObserver: an EngineObserver (engine/observer.h) whose events are
// the functions a test sets, for the few lines a fault or precision test
// needs (poison a gradient, stall a rank, read memory at an action). Unset
// functions ignore their event.
#ifndef ZEROSHARD_ENGINE_TESTING_FUNCTION_OBSERVER_H_
#define ZEROSHARD_ENGINE_TESTING_FUNCTION_OBSERVER_H_

#include <functional>

#include "engine/observer.h"

namespace zeroshard {

class FunctionObserver : public EngineObserver {
 public:
  std::function<void(MemoryTracker&)> before_allocation;
  std::function<void(const ActionEvent&)> action_start;
  std::function<void(const GradientEvent&)> reduced_gradient;
  std::function<void(const GradientEvent&)> final_gradient;

  void OnBeforeAllocation(MemoryTracker& tracker) override {
    if (before_allocation) before_allocation(tracker);
  }
  void OnActionStart(const ActionEvent& action) override {
    if (action_start) action_start(action);
  }
  void OnReducedGradient(const GradientEvent& grad) override {
    if (reduced_gradient) reduced_gradient(grad);
  }
  void OnFinalGradient(const GradientEvent& grad) override {
    if (final_gradient) final_gradient(grad);
  }
};

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_TESTING_FUNCTION_OBSERVER_H_
