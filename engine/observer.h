// EngineObserver: what an Engine tells the code watching it — steps,
// the actions of the step program, waits, and the gradients of a step —
// without reaching into the engine (docs/architecture.md, "The engine
// API"). Trainers time and report through it (the straggler report,
// engine/straggler.h); tests inject faults through it (a stalled rank, a
// poisoned gradient, a failing allocation).
//
// An observer is given to Engine::Create (then it also sees the events of
// Create) or to Engine::AddObserver (from then on). The engine does not own
// it; it must outlive the engine or be removed first. Every event is
// called on the thread driving the engine, synchronously, observers in the
// order they were added. An observer must not call the engine back.
//
// Events fire on every rank, at the same points of the program, so an
// observer that takes part in a collective of its own stays in step only if
// it does so on every rank. Observing changes nothing the engine computes:
// the bitwise guarantees (docs/determinism.md) hold with or without
// observers, unless an observer writes a gradient.
#ifndef ZEROSHARD_ENGINE_OBSERVER_H_
#define ZEROSHARD_ENGINE_OBSERVER_H_

#include <cstdint>

#include "core/memory_tracker.h"
#include "engine/step_program.h"

namespace zeroshard {

struct StepResult;

// A training step: `attempt` counts the TrainSteps attempted before this one
// (skipped ones included; the first is 0), `step` the optimizer steps taken
// before it.
struct StepEvent {
  int64_t attempt = 0;
  int64_t step = 0;
};

// One action of a training step's program (engine/step_program.h): its kind,
// unit, micro-batch, bucket and peer stage are on `action`.
struct ActionEvent {
  int64_t attempt = 0;
  const Action* action = nullptr;  // valid during the call
  int index = 0;                   // position in the program
  // The bytes this rank's collectives of the action move, as the program
  // lists them (the sum of Action::issues' bytes_per_rank).
  int64_t bytes = 0;
  // OnActionEnd only: the action's wall time, and how much of it was spent
  // blocked in collectives (the WaitEvents it reported).
  double seconds = 0;
  double wait_seconds = 0;
};

// Time an action was blocked for others, by what it waited for (the
// StepTimings fields of engine/engine.h that add it up).
enum class WaitKind : uint8_t {
  kGather,            // a parameter all-gather (WAIT_GATHER)
  kReduce,            // a gradient reduction (WAIT_REDUCE)
  kPipelineForward,   // a neighbour stage's activations
  kPipelineBackward,  // a neighbour stage's gradients
  kOptimizer,         // the optimizer's collectives (norm, publication)
};
const char* WaitKindName(WaitKind kind);  // "gather", "reduce", ...

struct WaitEvent {
  int64_t attempt = 0;
  const Action* action = nullptr;  // the action that waited; valid during the call
  WaitKind what = WaitKind::kGather;
  double seconds = 0;
};

// This rank's f32 gradient shard of one trainable unit: elements
// [ShardBegin(rank), +numel) of the unit's flat buffer (Engine::layout),
// on the engine's device. Writable: what an observer stores is what the
// engine goes on with. With engine.offload.grads: NVME the shard is not in
// memory: shard is null and numel 0.
struct GradientEvent {
  int64_t attempt = 0;
  int unit = 0;
  float* shard = nullptr;
  int64_t numel = 0;
};

class EngineObserver {
 public:
  virtual ~EngineObserver() = default;

  // Create, on every rank, after the config and model were agreed on and
  // before the model state is allocated, with the engine's tracker (a test
  // sets a byte limit on one rank to make its allocation fail; every rank
  // then returns kResourceExhausted). Only for observers given to Create.
  virtual void OnBeforeAllocation(MemoryTracker& tracker) {}

  // A TrainStep whose batches every rank accepted starts; it ends with
  // OnStepEnd and the step's result unless it failed (then the engine is
  // unusable: Engine's header). Evaluate is not a step.
  virtual void OnStepStart(const StepEvent& step) {}
  virtual void OnStepEnd(const StepEvent& step, const StepResult& result) {}

  // Before and after each action of the step's program, in program order.
  virtual void OnActionStart(const ActionEvent& action) {}
  virtual void OnActionEnd(const ActionEvent& action) {}
  // Within an action, once it is done: how long it was blocked, by kind.
  virtual void OnWait(const WaitEvent& wait) {}

  // After the step's gradient reduction and before the overflow check (and
  // a pipeline's tied-weight sum), once per trainable unit this rank
  // updates, in unit order (a tied weight on its owning stage only): the
  // reduced, still scaled gradient. A non-finite element written
  // here makes the step an overflow: skipped, on every rank.
  virtual void OnReducedGradient(const GradientEvent& grad) {}
  // Right before the update of a step that is not skipped, once per
  // trainable unit: the gradient the optimizer applies (unscaled, reweighed
  // to the global mean, clipped).
  virtual void OnFinalGradient(const GradientEvent& grad) {}
};

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_OBSERVER_H_
