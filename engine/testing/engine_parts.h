// EngineParts: an engine's resources and sharded state built as
// EngineImpl::Create builds them (options, plan, device, state, initial
// weights), without the facade, so that a component's test constructs the
// component itself over them. One pipeline stage, no tensor parallelism;
// the communicator serves as dp, control and world.
#ifndef ZEROSHARD_ENGINE_TESTING_ENGINE_PARTS_H_
#define ZEROSHARD_ENGINE_TESTING_ENGINE_PARTS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "engine/engine_resources.h"
#include "engine/sharded_state.h"
#include "nn/model.h"
#include "proto/engine_config.pb.h"

namespace zeroshard {

struct EngineParts {
  EngineResources resources;
  std::unique_ptr<ShardedState> state;  // destroyed before the resources
};

// Collective over `comm` (the initial weights' publication).
absl::StatusOr<std::unique_ptr<EngineParts>> MakeEngineParts(const EngineConfig& config, std::unique_ptr<Model> model,
                                                             Communicator* comm);

// A small config for the toy model (engine/testing/toy_model.h): ZeRO
// `stage`, `accumulation_steps` micro-batches, AdamW, seed 42, one thread.
EngineConfig ToyEngineConfig(int stage, int accumulation_steps);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_TESTING_ENGINE_PARTS_H_
