// The GPT-2 a TrainConfig describes, as every tool builds it (trainer,
// check-config, schedule, ckpt import): model fields as given, the
// vocabulary padded to a multiple of engine.parallel.tp so each tensor-
// parallel rank holds an equal range of embedding rows (docs/model.md).
#ifndef ZEROSHARD_MODELS_GPT2_GPT2_MODEL_CONFIG_H_
#define ZEROSHARD_MODELS_GPT2_GPT2_MODEL_CONFIG_H_

#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_config.pb.h"

namespace zeroshard {

Gpt2Config Gpt2ConfigFromTrainConfig(const TrainConfig& config);

// Parameters of the GPT-2 `model` describes (tied head counted once, no
// vocabulary padding).
long long Gpt2ParamCount(const ModelConfig& model);

}  // namespace zeroshard

#endif  // ZEROSHARD_MODELS_GPT2_GPT2_MODEL_CONFIG_H_
