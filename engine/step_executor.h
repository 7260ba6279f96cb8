// StepExecutor: runs a step program (engine/step_program.h) one action at a
// time over a run context. It runs the units (FORWARD, RECOMPUTE, BACKWARD,
// BACKWARD_INPUT, BACKWARD_WEIGHT), the ZeRO policy's gathers, releases and
// reductions on the sharded state, and BEGIN_STEP (the batch agreement);
// pipeline transfers go to the PipelineTransport and the optimizer phase's
// actions to the OptimizerPhase. With observers it sends each action's
// start, waits and end (training only).
//
// Its state is keyed by (micro-batch, unit): the output of a FORWARD until
// the next unit consumed it, the saved activations (or, for a checkpointed
// unit, the kept input) until the BACKWARD, and the gradient of the unit's
// output until the unit's BACKWARD consumed it.
//
// Thread-compatible; the resources and the components must outlive it.
#ifndef ZEROSHARD_ENGINE_STEP_EXECUTOR_H_
#define ZEROSHARD_ENGINE_STEP_EXECUTOR_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/engine.h"
#include "engine/engine_resources.h"
#include "engine/optimizer_phase.h"
#include "engine/pipeline_transport.h"
#include "engine/sharded_state.h"
#include "engine/step_program.h"
#include "nn/batch.h"
#include "nn/unit.h"

namespace zeroshard {

// Executor state of one (micro-batch, unit).
struct UnitState {
  ActivationPack output;  // FORWARD's output until the next unit consumed it
  std::unique_ptr<SavedActivations> saved;
  ActivationPack kept_input;  // checkpointed: the input RECOMPUTE reads
  bool awaiting_backward = false;
  ActivationPack output_grad;  // d(objective)/d(output), written by the next unit's BACKWARD
  // BACKWARD_INPUT's keep for BACKWARD_WEIGHT (units that split).
  std::unique_ptr<SavedActivations> weight_inputs;
};

// Per-run executor context (one TrainStep or Evaluate).
struct RunContext {
  absl::Span<const Batch> batches;
  bool training = true;
  float loss_seed = 0;        // d(objective)/d(loss sum) the last unit's BACKWARD starts from
  double nominal_weight = 0;  // Σ over ranks and micro-batches of Unit::NominalLossWeight
  StepResult* result = nullptr;
  PipelineTransfers transfers;
  std::vector<LossTerms> losses;              // per micro-batch
  std::vector<std::vector<UnitState>> state;  // [micro-batch][unit]
  StepTimings* timings = nullptr;
  bool in_backward = false;
  // BEGIN_STEP: the caller's host batches, the device copies the units
  // read (GPU only) and their memory, and whether the step started (a
  // failure before that was agreed and leaves the engine usable).
  absl::Span<const Batch> host_batches;
  std::vector<Buffer> batch_storage;
  std::vector<Batch> device_batches;
  bool started = false;
  OptimizerPhaseState optimizer;
};

class StepExecutor {
 public:
  StepExecutor(EngineResources* resources, ShardedState* state, PipelineTransport* transport, OptimizerPhase* optimizer)
      : res_(resources), state_(state), transport_(transport), optimizer_(optimizer) {}

  // Runs every action of `program`, then waits for the pipeline's sends.
  // Collective as the program is: every rank of the job runs its own.
  absl::Status RunProgram(const StepProgram& program, RunContext* run);

  // Collective over the control group: every rank's status, batch
  // signature and nominal loss weight. `local` not OK: returned, after the
  // exchange. Another rank's failure: relayed with its code. Batches that
  // differ in names, dtypes or shapes: kInvalidArgument. Else OK with
  // *nominal_weight the sum over ranks.
  absl::Status AgreeOnBatches(absl::Span<const Batch> batches, const absl::Status& local, double* nominal_weight);

  // The most units gathered at once and activations kept at once so far.
  int peak_gathered() const { return peak_gathered_; }
  int peak_kept() const { return peak_kept_; }

 private:
  absl::Status RunAction(const Action& action, RunContext* run);
  absl::Status RunParamShardIo(const Action& action);
  // RunAction between the observers' action events, with the waits it
  // added to run->timings.
  absl::Status RunObservedAction(const Action& action, int index, RunContext* run);
  absl::Status BeginStep(RunContext* run);
  absl::Status ParamViews(int unit, std::vector<TensorView>* params, std::vector<TensorView>* grads);
  UnitContext ContextFor(const RunContext& run, int micro_batch, int unit) const;
  void CountLive();

  EngineResources* res_;
  ShardedState* state_;
  PipelineTransport* transport_;
  OptimizerPhase* optimizer_;
  int peak_gathered_ = 0;
  int peak_kept_ = 0;
  int kept_now_ = 0;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_STEP_EXECUTOR_H_
