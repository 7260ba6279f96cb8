// Loading and validating the classifier example's ClassifierTrainConfig
// (classifier_config.proto).
#ifndef ZEROSHARD_MODELS_CLASSIFIER_CLASSIFIER_CONFIG_H_
#define ZEROSHARD_MODELS_CLASSIFIER_CLASSIFIER_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/config_validation.h"
#include "models/classifier/classifier_config.pb.h"
#include "models/classifier/classifier_data.h"

namespace zeroshard {

// Every error of the model, data and steps fields, then the engine
// section's (EngineConfigErrors, with data.batch_size as the global batch);
// empty when valid.
std::vector<std::string> ClassifierConfigErrors(const ClassifierTrainConfig& config, const ValidationOptions& options);

// Reads `path` (its header must name zeroshard.ClassifierTrainConfig),
// applies `overrides` in order and validates for `world_size` ranks (-1:
// not checked). kNotFound when the file cannot be read; kInvalidArgument
// with every error otherwise (config_loader.h).
absl::StatusOr<ClassifierTrainConfig> LoadClassifierConfig(const std::string& path,
                                                           const std::vector<std::string>& overrides, int world_size);

// The engine section the run uses: a decaying schedule's decay_steps 0
// resolved to max(steps, warmup_steps + 1).
EngineConfig ClassifierEngineConfig(const ClassifierTrainConfig& config);

// The blobs of the config's data and model sections.
BlobOptions ClassifierBlobOptions(const ClassifierTrainConfig& config, BlobSplit split);

}  // namespace zeroshard

#endif  // ZEROSHARD_MODELS_CLASSIFIER_CLASSIFIER_CONFIG_H_
