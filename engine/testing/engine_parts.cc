#include "engine/testing/engine_parts.h"

#include <utility>

#include "core/status_macros.h"
#include "engine/engine_options.h"
#include "engine/step_plan.h"

namespace zeroshard {

absl::StatusOr<std::unique_ptr<EngineParts>> MakeEngineParts(const EngineConfig& config, std::unique_ptr<Model> model,
                                                             Communicator* comm) {
  auto parts = std::make_unique<EngineParts>();
  EngineResources& r = parts->resources;
  ASSIGN_OR_RETURN(r.options, EngineOptionsFromConfig(config));
  r.comms.dp = r.comms.control = r.comms.world = comm;
  r.model = std::move(model);
  ASSIGN_OR_RETURN(r.plan, PlanStep(*r.model, r.options, comm->size(), /*stage=*/0));
  RETURN_IF_ERROR(r.InitDevice());
  ASSIGN_OR_RETURN(parts->state, ShardedState::Create(r.plan, *r.model, r.options, comm, /*replica=*/nullptr,
                                                      /*embedding=*/nullptr, &r.tracker, r.compute,
                                                      r.timeline.get()));
  RETURN_IF_ERROR(parts->state->InitParams(*r.model, r.options.seed, /*tp_rank=*/0, /*tp_size=*/1));
  return parts;
}

EngineConfig ToyEngineConfig(int stage, int accumulation_steps) {
  EngineConfig c;
  c.mutable_zero()->set_stage(stage);
  c.mutable_zero()->set_bucket_bytes(4096);
  c.set_gradient_accumulation_steps(accumulation_steps);
  c.mutable_parallel()->set_dp(1);
  c.mutable_optimizer()->set_type(OptimizerConfig::ADAMW);
  c.mutable_optimizer()->set_lr(1e-3);
  c.mutable_optimizer()->set_eps(1e-6);
  c.mutable_optimizer()->set_weight_decay(0.1);
  c.mutable_optimizer()->set_grad_clip(1.0);
  c.mutable_device()->set_threads_per_rank(1);
  c.set_seed(42);
  return c;
}

}  // namespace zeroshard
