// Evaluator: the engine's two reads of the model outside a training step —
// Evaluate (the forward-only program, its loss and metrics summed over the
// job) and GatherParam (one parameter whole, on every rank). Both are
// collective over the job; a failure after the batch agreement (or the
// gather's allocation agreement) leaves the engine unusable
// (EngineResources::broken).
//
// Thread-compatible; the resources, the state and the executor must outlive it.
#ifndef ZEROSHARD_ENGINE_EVALUATOR_H_
#define ZEROSHARD_ENGINE_EVALUATOR_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/engine.h"
#include "engine/engine_resources.h"
#include "engine/sharded_state.h"
#include "engine/step_executor.h"
#include "nn/batch.h"

namespace zeroshard {

class Evaluator {
 public:
  Evaluator(EngineResources* resources, ShardedState* state, StepExecutor* executor)
      : res_(resources), state_(state), executor_(executor) {}

  // See Engine::Evaluate and Engine::GatherParam.
  absl::StatusOr<EvalResult> Evaluate(const Batch& batch);
  absl::StatusOr<std::vector<float>> GatherParam(absl::string_view name);

 private:
  EngineResources* res_;
  ShardedState* state_;
  StepExecutor* executor_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_EVALUATOR_H_
