// GPT-2's run config (TrainConfig, models/gpt2/gpt2_config.proto): parsing,
// loading and validation. Every error starts with its field path and names
// the bad and the expected value, e.g.
//   model.n_head: 3 does not divide model.n_embd = 32
// and the engine section's are engine/config_validation.h's.
#ifndef ZEROSHARD_MODELS_GPT2_TRAIN_CONFIG_H_
#define ZEROSHARD_MODELS_GPT2_TRAIN_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/config_validation.h"
#include "models/gpt2/gpt2_config.pb.h"

namespace zeroshard {

// A TrainConfig's errors: model and data sections, then EngineConfigErrors
// (global batch data.batch_size); empty when valid.
std::vector<std::string> TrainConfigErrors(const TrainConfig& config, const ValidationOptions& options);

// Sequences per rank per forward of a valid config.
int MicroBatchSize(const TrainConfig& config);

// Parses text-format `text` (ParseConfigText's errors); does not validate.
absl::StatusOr<TrainConfig> ParseTrainConfig(absl::string_view text, absl::string_view source_name);

// LoadConfigMessage into a TrainConfig (a file without a header is one),
// then TrainConfigErrors for `world_size` ranks (-1: don't check the
// world): kInvalidArgument "PATH: invalid config:" and every error, one a
// line.
absl::StatusOr<TrainConfig> LoadTrainConfig(const std::string& path,
                                            const std::vector<std::string>& overrides = {},
                                            int world_size = -1);

}  // namespace zeroshard

#endif  // ZEROSHARD_MODELS_GPT2_TRAIN_CONFIG_H_
