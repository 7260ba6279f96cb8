#include "cli/run_config.h"

#include <utility>

#include "core/status_macros.h"
#include "engine/config_loader.h"
#include "engine/model_config_validation.h"
#include "google/protobuf/text_format.h"
#include "models/registry.h"

namespace zeroshard::cli {

std::vector<std::string> KnownConfigMessages() {
  std::vector<std::string> messages;
  for (const std::string& name : ModelRegistry::Global().names()) {
    messages.push_back((*ModelRegistry::Global().Find(name))->prototype->GetDescriptor()->full_name());
  }
  return messages;
}

absl::StatusOr<RunConfig> LoadRunConfig(const std::string& path, const std::vector<std::string>& overrides,
                                        int world_size) {
  ASSIGN_OR_RETURN(LoadedRunConfig loaded, LoadRunConfigFile(ModelRegistry::Global(), path, overrides, world_size));
  const ModelRegistration& model = *loaded.model;
  std::shared_ptr<const google::protobuf::Message> config = std::move(loaded.config);
  RunConfig run;
  run.kind = model.name;
  run.message_name = config->GetDescriptor()->full_name();
  run.engine = ResolvedEngineConfig(model, *config);
  run.global_batch = model.global_batch(*config);
  google::protobuf::TextFormat::PrintToString(*config, &run.normalized_text);
  run.record = RunRecordOf(model, *config);
  run.build_model = [&model, config]() { return model.build(*config, RankCoordinates{}); };
  ASSIGN_OR_RETURN(std::unique_ptr<Model> built, run.build_model());
  RunSummary summary = model.summarize(*config, *built);
  run.rows_name = std::move(summary.rows_name);
  run.batch_note = std::move(summary.batch_note);
  run.training_summary = std::move(summary.training_summary);
  run.model_summary = std::move(summary.model_summary);
  run.sequence_length = summary.sequence_length;
  RETURN_IF_ERROR(InvalidConfig(path, EngineModelErrors(run.engine, *built)));
  return run;
}

}  // namespace zeroshard::cli
