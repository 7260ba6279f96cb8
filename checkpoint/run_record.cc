#include "checkpoint/run_record.h"

#include <string>

#include "google/protobuf/text_format.h"

namespace zeroshard {

CheckpointRunConfig MakeRunRecord(absl::string_view model, const google::protobuf::Message& run_config,
                                  const EngineConfig& engine) {
  CheckpointRunConfig run;
  *run.mutable_engine() = engine;
  run.set_model_name(std::string(model));
  run.set_config_message(run_config.GetDescriptor()->full_name());
  google::protobuf::TextFormat::PrintToString(run_config, run.mutable_config_text());
  return run;
}

}  // namespace zeroshard
