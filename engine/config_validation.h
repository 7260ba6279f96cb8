// Semantic checks of a run config: ranges, cross-field rules, and fields
// whose feature is not built yet. Every message starts with the field path
// and names the bad and the expected value, e.g.
//   engine.zero.stage: 4 is out of range [0, 3]
//   engine.parallel: dp*tp*pp = 8 but the world has 4 ranks
// EngineConfigErrors holds every rule of the engine section, so each model's
// run config (models/registry.h) checks its own sections and calls it; rules
// that need the model (which units exist) are model_config_validation.h's.
#ifndef ZEROSHARD_ENGINE_CONFIG_VALIDATION_H_
#define ZEROSHARD_ENGINE_CONFIG_VALIDATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/engine_config.pb.h"

namespace zeroshard {

struct ValidationOptions {
  // Ranks the run will have; -1 skips the dp*tp*pp check.
  int world_size = -1;
  // The field the global batch comes from, as the batch-split rule names it.
  std::string batch_field = "data.batch_size";
};

// The rules of hybrid sharding and int8 communication in engine.zero
// (docs/parallelism.md): S divides dp, weight quantization only at stage 3,
// block >= 32, error feedback only with gradient quantization, which needs
// an f32 reduce dtype. Part of EngineConfigErrors; EngineOptionsFromConfig
// refuses the first.
std::vector<std::string> ZeroShardingErrors(const EngineConfig& engine);

// Errors of the engine section, each prefixed "engine." (or
// options.batch_field for the global batch: at least 1, and a multiple of
// dp x gradient_accumulation_steps), in field order; empty when valid.
// `global_batch` is the config's rows (sequences, examples) per optimizer
// step.
std::vector<std::string> EngineConfigErrors(const EngineConfig& engine, int64_t global_batch,
                                            const ValidationOptions& options);

// Rows per rank per forward implied by a valid engine section:
// global_batch / (dp * gradient_accumulation_steps).
int64_t MicroBatchSize(const EngineConfig& engine, int64_t global_batch);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_CONFIG_VALIDATION_H_
