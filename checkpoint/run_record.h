// What a checkpoint manifest records of the run that saved it
// (CheckpointRunConfig, proto/checkpoint.proto): the engine section, the
// model's registry name and the whole run config in text format, so tools
// can rebuild the run's model through the model registry
// (models/registry.h) without the checkpoint code knowing any model.
#ifndef ZEROSHARD_CHECKPOINT_RUN_RECORD_H_
#define ZEROSHARD_CHECKPOINT_RUN_RECORD_H_

#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "proto/checkpoint.pb.h"
#include "proto/engine_config.pb.h"

namespace zeroshard {

// `model` is the registry name ("gpt2"); `run_config` the whole config as
// given (printed in text format with its message type's full name);
// `engine` its engine section.
CheckpointRunConfig MakeRunRecord(absl::string_view model, const google::protobuf::Message& run_config,
                                  const EngineConfig& engine);

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_RUN_RECORD_H_
