#include "models/registry.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/run_record.h"
#include "core/status_macros.h"
#include "engine/config_loader.h"

namespace zeroshard {
namespace {

const char* MissingPart(const ModelRegistration& m) {
  if (m.name.empty()) return "name";
  if (m.prototype == nullptr) return "prototype";
  if (!m.errors) return "errors";
  if (!m.engine) return "engine";
  if (!m.global_batch) return "global_batch";
  if (!m.steps) return "steps";
  if (!m.build) return "build";
  if (!m.summarize) return "summarize";
  return nullptr;
}

std::string MessageOf(const ModelRegistration& m) { return m.prototype->GetDescriptor()->full_name(); }

}  // namespace

ModelRegistry& ModelRegistry::Global() {
  static ModelRegistry* registry = new ModelRegistry();
  return *registry;
}

absl::Status ModelRegistry::Register(ModelRegistration model) {
  if (const char* missing = MissingPart(model)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model registration '", model.name, "' has no ", missing, "; every part is required"));
  }
  for (const ModelRegistration& m : models_) {
    if (m.name == model.name) {
      return absl::AlreadyExistsError(absl::StrCat("a model named '", model.name, "' is registered already"));
    }
    if (MessageOf(m) == MessageOf(model)) {
      return absl::AlreadyExistsError(absl::StrCat("model '", model.name, "' registers ", MessageOf(model),
                                                   ", which model '", m.name, "' registered already"));
    }
  }
  auto at = std::lower_bound(models_.begin(), models_.end(), model.name,
                             [](const ModelRegistration& m, const std::string& name) { return m.name < name; });
  models_.insert(at, std::move(model));
  return absl::OkStatus();
}

absl::StatusOr<const ModelRegistration*> ModelRegistry::Find(absl::string_view name) const {
  RETURN_IF_ERROR(first_error_);
  for (const ModelRegistration& m : models_) {
    if (m.name == name) return &m;
  }
  return absl::NotFoundError(
      absl::StrCat("no model named '", name, "' is registered; registered: ", absl::StrJoin(names(), ", ")));
}

absl::StatusOr<const ModelRegistration*> ModelRegistry::FindByMessage(absl::string_view message) const {
  RETURN_IF_ERROR(first_error_);
  for (const ModelRegistration& m : models_) {
    if (MessageOf(m) == message) return &m;
  }
  return absl::NotFoundError(absl::StrCat("no registered model reads ", message, "; registered: ", Describe()));
}

std::vector<std::string> ModelRegistry::names() const {
  std::vector<std::string> out;
  for (const ModelRegistration& m : models_) out.push_back(m.name);
  return out;
}

std::string ModelRegistry::Describe() const {
  std::vector<std::string> parts;
  for (const ModelRegistration& m : models_) parts.push_back(absl::StrCat(m.name, " (", MessageOf(m), ")"));
  return absl::StrJoin(parts, ", ");
}

ModelRegistrar::ModelRegistrar(ModelRegistration model) {
  ModelRegistry& registry = ModelRegistry::Global();
  absl::Status s = registry.Register(std::move(model));
  if (!s.ok() && registry.first_error_.ok()) registry.first_error_ = s;
}

std::string RunConfigMessageName(absl::string_view text) {
  std::string name = ConfigMessageName(text);
  return name.empty() ? kHeaderlessConfigMessage : name;
}

absl::Status LoadRunConfigMessage(const std::string& path, const std::vector<std::string>& overrides,
                                  google::protobuf::Message* message) {
  return LoadConfigMessage(path, overrides, kHeaderlessConfigMessage, message);
}

absl::StatusOr<LoadedRunConfig> LoadRunConfigFile(const ModelRegistry& registry, const std::string& path,
                                                  const std::vector<std::string>& overrides, int world_size) {
  ASSIGN_OR_RETURN(const std::string text, ReadConfigFile(path));
  const std::string message = RunConfigMessageName(text);
  absl::StatusOr<const ModelRegistration*> model = registry.FindByMessage(message);
  if (!model.ok()) {
    if (!absl::IsNotFound(model.status())) return model.status();
    return absl::InvalidArgumentError(absl::StrCat(path, ": '# proto-message: ", message,
                                                   "' names no registered model; registered: ", registry.Describe()));
  }
  LoadedRunConfig loaded;
  loaded.model = *model;
  loaded.config.reset((*model)->prototype->New());
  RETURN_IF_ERROR(LoadRunConfigMessage(path, overrides, loaded.config.get()));
  ValidationOptions options;
  options.world_size = world_size;
  RETURN_IF_ERROR(InvalidConfig(path, loaded.model->errors(*loaded.config, options)));
  return loaded;
}

absl::StatusOr<std::unique_ptr<google::protobuf::Message>> ParseRunConfig(const ModelRegistration& model,
                                                                         absl::string_view text,
                                                                         absl::string_view source_name) {
  std::unique_ptr<google::protobuf::Message> config(model.prototype->New());
  RETURN_IF_ERROR(ParseConfigText(text, source_name, config.get()));
  return config;
}

EngineConfig ResolvedEngineConfig(const ModelRegistration& model, const google::protobuf::Message& config) {
  EngineConfig engine = model.engine(config);
  LrScheduleConfig* lr = engine.mutable_lr_schedule();
  if (lr->type() != LrScheduleConfig::CONSTANT && lr->decay_steps() == 0) {
    lr->set_decay_steps(static_cast<int32_t>(std::max<int64_t>(model.steps(config), lr->warmup_steps() + 1)));
  }
  return engine;
}

CheckpointRunConfig RunRecordOf(const ModelRegistration& model, const google::protobuf::Message& config) {
  return MakeRunRecord(model.name, config, model.engine(config));
}

}  // namespace zeroshard
