// Rules of the engine section that depend on the model a config builds:
// which units exist, and how many. Every config kind runs them once it has built its
// model (zeroshard check-config does for every kind); Engine::Create
// rejects the same configs, this only says so before a run starts.
#ifndef ZEROSHARD_ENGINE_MODEL_CONFIG_VALIDATION_H_
#define ZEROSHARD_ENGINE_MODEL_CONFIG_VALIDATION_H_

#include <string>
#include <vector>

#include "nn/model.h"
#include "proto/engine_config.pb.h"

namespace zeroshard {

// Every engine.activation_checkpointing.units name (policy NAMED) is a unit
// of `model`; one error per unknown name, listing the model's units:
//   engine.activation_checkpointing.units: 'h.7' is not a unit of the model; expected one of embed, h.0, h.1, head
// and, with selective: true, one that has a selective form
// (Unit::SupportsSelectiveCheckpointing):
//   engine.activation_checkpointing.units: 'head' has no selective form (selective: true); expected one of h.0, h.1
// With pp > 1 (docs/parallelism.md): the chunks fit the model's units and
// an explicit partition covers them exactly:
//   engine.parallel.pp: 8 exceeds the model's 6 units
//   engine.parallel.pp: 4 x virtual_stages 2 = 8 chunks exceed the model's 6 units
//   engine.parallel.pp_partition: sums to 5, expected the model's 6 units
std::vector<std::string> EngineModelErrors(const EngineConfig& engine, const Model& model);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_MODEL_CONFIG_VALIDATION_H_
