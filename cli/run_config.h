// RunConfig: the run config of any registered model (models/registry.h),
// loaded, validated and able to build its model, so check-config, schedule
// and `ckpt import` treat every model alike. docs/config_reference.md says
// how a config names its model.
#ifndef ZEROSHARD_CLI_RUN_CONFIG_H_
#define ZEROSHARD_CLI_RUN_CONFIG_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nn/model.h"
#include "proto/checkpoint.pb.h"
#include "proto/engine_config.pb.h"

namespace zeroshard::cli {

struct RunConfig {
  std::string kind;  // the registered model's name: "gpt2", "classifier"
  // The message type the file names ("zeroshard.TrainConfig", ...).
  std::string message_name;
  // The engine section, with decay_steps resolved as the trainer resolves it.
  EngineConfig engine;
  // Rows (sequences, examples) per optimizer step: data.batch_size.
  int64_t global_batch = 0;
  // What a row is, plural: "sequences", "examples".
  std::string rows_name;
  // Appended to check-config's batch line: "; 16384 tokens/step" (may be empty).
  std::string batch_note;
  // One line on the run's length and data: "50 steps, eval every 25, train data datasets/corpus_train.bin".
  std::string training_summary;
  // The whole config in text form, normalized (check-config prints it).
  std::string normalized_text;
  // One line: "GPT-2 n_layer=2 n_head=2 n_embd=32 vocab_size=256 seq_len=32: 62080 parameters".
  std::string model_summary;
  // Tokens per row of a micro-batch (1 without a sequence).
  int64_t sequence_length = 1;
  // Builds the run's model (no parameter memory is allocated).
  std::function<absl::StatusOr<std::unique_ptr<Model>>()> build_model;
  // What a checkpoint manifest records of the run (`ckpt import`).
  CheckpointRunConfig record;
};

// The message types a config may name, one per registered model.
std::vector<std::string> KnownConfigMessages();

// Reads `path`, finds its model in ModelRegistry::Global() by its
// "# proto-message:" header (none: kHeaderlessConfigMessage), applies the
// --set overrides in order, validates it for `world_size` ranks (-1: not
// checked), builds its model and checks the engine section against it
// (EngineModelErrors). kNotFound when the file cannot be read;
// kInvalidArgument naming an unknown message type and the registered
// models, or listing every error ("FILE:LINE:COL: ..." for syntax,
// "field.path: ..." for values) otherwise.
absl::StatusOr<RunConfig> LoadRunConfig(const std::string& path, const std::vector<std::string>& overrides,
                                        int world_size);

}  // namespace zeroshard::cli

#endif  // ZEROSHARD_CLI_RUN_CONFIG_H_
