// Semantic checks of a TrainConfig: ranges, cross-field rules, and fields
// whose feature is not built yet. Every message starts with the field path
// and names the bad and the expected value, e.g.
//   engine.zero.stage: 4 is out of range [0, 3]
//   engine.parallel: dp*tp*pp = 8 but the world has 4 ranks
#ifndef ZEROSHARD_ENGINE_CONFIG_VALIDATION_H_
#define ZEROSHARD_ENGINE_CONFIG_VALIDATION_H_

#include <string>
#include <vector>

#include "proto/config.pb.h"

namespace zeroshard {

struct ValidationOptions {
  // Ranks the run will have; -1 skips the dp*tp*pp check.
  int world_size = -1;
};

// All errors, in field order; empty when the config is valid.
std::vector<std::string> TrainConfigErrors(const TrainConfig& config, const ValidationOptions& options);

// Micro-batch (sequences per rank per forward) implied by a valid config:
// data.batch_size / (dp * gradient_accumulation_steps).
int MicroBatchSize(const TrainConfig& config);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_CONFIG_VALIDATION_H_
