// The model registry: every model the tools serve, by name. A model
// registers its run-config message, how to validate it, how to build the
// model from it, what check-config prints about it and how its tensors are
// named in checkpoints; `zeroshard check-config`, `schedule` and `ckpt
// import` then serve any registered model without naming one
// (docs/architecture.md, "Where to add a model").
//
// A config file names its model by its run-config message:
// protobuf's text-format header "# proto-message: NAME", or, without one,
// kHeaderlessConfigMessage (docs/config_reference.md).
//
// Models register at static initialisation, one line each, from a library
// built with alwayslink:
//   ZS_REGISTER_MODEL(Gpt2Registration());
#ifndef ZEROSHARD_MODELS_REGISTRY_H_
#define ZEROSHARD_MODELS_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/config_validation.h"
#include "google/protobuf/message.h"
#include "nn/model.h"
#include "proto/checkpoint.pb.h"
#include "proto/engine_config.pb.h"

namespace zeroshard {

// What a config file without a "# proto-message:" header holds: GPT-2's
// run config, so configs written before the header existed keep working.
inline constexpr char kHeaderlessConfigMessage[] = "zeroshard.TrainConfig";

// A rank's coordinates in the process grid. The registered models build the
// same global model on every rank (the engine cuts tensor-parallel slices
// and places pipeline stages), so they do not read them; a model whose
// units differ by rank would.
struct RankCoordinates {
  int dp_rank = 0;
  int tp_rank = 0;
  int pp_rank = 0;
};

// What check-config prints about a run beside its engine section.
struct RunSummary {
  std::string rows_name;         // what a row of the batch is, plural: "sequences"
  std::string batch_note;        // appended to the batch line: "; 16384 tokens/step" (may be empty)
  std::string training_summary;  // "50 steps, eval every 25, train data datasets/corpus_train.bin"
  std::string model_summary;     // "GPT-2 n_layer=2 ...: 62080 parameters"
  // Tokens per row (GPT-2: seq_len; 1 for models without a sequence): the
  // micro-batch shape the memory planner estimates activations for.
  int64_t sequence_length = 1;
};

// One registered model. Every function receives a message of prototype's
// type.
struct ModelRegistration {
  using Message = google::protobuf::Message;
  // "gpt2": what a checkpoint manifest records (CheckpointRunConfig.model).
  std::string name;
  // The default instance of the model's run-config message; its full name
  // is what a config's header names.
  const Message* prototype = nullptr;
  // Every error of a whole run config (model and data sections, then
  // EngineConfigErrors), each starting with its field path; empty when
  // valid.
  std::function<std::vector<std::string>(const Message& config, const ValidationOptions& options)> errors;
  // The run's engine section as given, its rows per optimizer step and its
  // optimizer steps.
  std::function<const EngineConfig&(const Message& config)> engine;
  std::function<int64_t(const Message& config)> global_batch;
  std::function<int64_t(const Message& config)> steps;
  // The run's model for a valid config (no parameter memory is allocated).
  std::function<absl::StatusOr<std::unique_ptr<Model>>(const Message& config, const RankCoordinates& rank)> build;
  std::function<RunSummary(const Message& config, const Model& model)> summarize;
  // How consolidated safetensors files name the model's tensors and what an
  // import skips, in one line (`zeroshard ckpt inspect` prints it).
  std::string tensor_naming;
};

class ModelRegistry {
 public:
  // The registry ZS_REGISTER_MODEL adds to.
  static ModelRegistry& Global();

  // kInvalidArgument for a registration missing a part; kAlreadyExists when
  // its name or its message is registered already.
  absl::Status Register(ModelRegistration model);

  // kNotFound "no model named 'x' is registered; registered: classifier,
  // gpt2". Also the first failed registration's error, if any.
  absl::StatusOr<const ModelRegistration*> Find(absl::string_view name) const;
  // By run-config message (full name); kNotFound naming it and the
  // registered models with their messages.
  absl::StatusOr<const ModelRegistration*> FindByMessage(absl::string_view message) const;

  // Registered names, sorted.
  std::vector<std::string> names() const;
  // "classifier (zeroshard.ClassifierTrainConfig), gpt2 (zeroshard.TrainConfig)".
  std::string Describe() const;

 private:
  friend struct ModelRegistrar;
  std::vector<ModelRegistration> models_;  // sorted by name
  absl::Status first_error_;
};

// Registers into ModelRegistry::Global(); a failure is kept and returned by
// every later lookup (registration runs before main, where nothing can
// report it).
struct ModelRegistrar {
  explicit ModelRegistrar(ModelRegistration model);
};

#define ZS_REGISTER_MODEL_CONCAT_(a, b) a##b
#define ZS_REGISTER_MODEL_NAME_(line) ZS_REGISTER_MODEL_CONCAT_(zs_model_registrar_, line)
#define ZS_REGISTER_MODEL(registration) \
  static const ::zeroshard::ModelRegistrar ZS_REGISTER_MODEL_NAME_(__LINE__)(registration)

// The run-config message a config text names: its "# proto-message:"
// header, or kHeaderlessConfigMessage without one.
std::string RunConfigMessageName(absl::string_view text);

// LoadConfigMessage (engine/config_loader.h) with the registry's rule for
// files without a header.
absl::Status LoadRunConfigMessage(const std::string& path, const std::vector<std::string>& overrides,
                                  google::protobuf::Message* message);

// A registered model's run config, read, overridden and validated.
struct LoadedRunConfig {
  const ModelRegistration* model = nullptr;
  std::unique_ptr<google::protobuf::Message> config;
};

// Reads `path`, finds the registered model whose message its header names,
// parses it, applies `overrides` in order and validates it for `world_size`
// ranks (-1: not checked). kNotFound when the file cannot be read;
// kInvalidArgument "PATH: '# proto-message: X' names no registered model;
// registered: ..." for an unknown message, or listing every error.
absl::StatusOr<LoadedRunConfig> LoadRunConfigFile(const ModelRegistry& registry, const std::string& path,
                                                  const std::vector<std::string>& overrides, int world_size);

// Parses `text` as `model`'s run config; errors as ParseConfigText's. Does
// not validate.
absl::StatusOr<std::unique_ptr<google::protobuf::Message>> ParseRunConfig(const ModelRegistration& model,
                                                                         absl::string_view text,
                                                                         absl::string_view source_name);

// The engine section a run uses: a decaying schedule's decay_steps 0
// resolved to max(steps, warmup_steps + 1), as every trainer resolves it.
EngineConfig ResolvedEngineConfig(const ModelRegistration& model, const google::protobuf::Message& config);

// What a checkpoint manifest records of the run (checkpoint/run_record.h).
CheckpointRunConfig RunRecordOf(const ModelRegistration& model, const google::protobuf::Message& config);

}  // namespace zeroshard

#endif  // ZEROSHARD_MODELS_REGISTRY_H_
