// The GPT-2 a TrainConfig describes, as every tool builds it (trainer,
// check-config, schedule, ckpt import): model fields as given, the
// vocabulary padded to a multiple of engine.parallel.tp so each tensor-
// parallel rank holds an equal range of embedding rows (docs/model.md).
#ifndef ZEROSHARD_EXAMPLES_GPT2_MODEL_CONFIG_H_
#define ZEROSHARD_EXAMPLES_GPT2_MODEL_CONFIG_H_

#include "nn/gpt2.h"
#include "proto/config.pb.h"

namespace zeroshard {

Gpt2Config Gpt2ConfigFromTrainConfig(const TrainConfig& config);

}  // namespace zeroshard

#endif  // ZEROSHARD_EXAMPLES_GPT2_MODEL_CONFIG_H_
