// GPT-2's entry in the model registry (models/registry.h): name "gpt2", run
// config zeroshard.TrainConfig (also what a file without a header holds).
#ifndef ZEROSHARD_MODELS_GPT2_GPT2_REGISTRATION_H_
#define ZEROSHARD_MODELS_GPT2_GPT2_REGISTRATION_H_

#include "models/gpt2/gpt2_config.pb.h"
#include "models/registry.h"
#include "proto/checkpoint.pb.h"

namespace zeroshard {

inline constexpr char kGpt2ModelName[] = "gpt2";

ModelRegistration Gpt2Registration();

// What a checkpoint manifest records of a GPT-2 run.
CheckpointRunConfig Gpt2RunRecord(const TrainConfig& config);

}  // namespace zeroshard

#endif  // ZEROSHARD_MODELS_GPT2_GPT2_REGISTRATION_H_
