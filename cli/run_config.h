// RunConfig: any run config the zeroshard command reads — GPT-2's
// TrainConfig or another model's (the classifier example's) — loaded,
// validated and able to build its model, so check-config, schedule and
// `ckpt import` treat every shipped config alike. docs/config_reference.md
// says how a config names its model.
#ifndef ZEROSHARD_CLI_RUN_CONFIG_H_
#define ZEROSHARD_CLI_RUN_CONFIG_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nn/model.h"
#include "proto/config.pb.h"

namespace zeroshard::cli {

struct RunConfig {
  std::string kind;  // "gpt2", "classifier"
  // The engine section, with decay_steps resolved as the trainer resolves it.
  EngineConfig engine;
  // Rows (sequences, examples) per optimizer step: data.batch_size.
  int64_t global_batch = 0;
  // The whole config in text form, normalized (check-config prints it).
  std::string normalized_text;
  // One line: "GPT-2 n_layer=2 n_head=2 n_embd=32 vocab_size=256 seq_len=32: 62080 parameters".
  std::string model_summary;
  // Builds the run's model (no parameter memory is allocated).
  std::function<absl::StatusOr<std::unique_ptr<Model>>()> build_model;
};

// Reads `path`, recognises its kind, applies the --set overrides in order
// and validates it for `world_size` ranks (-1: not checked). kNotFound when
// the file cannot be read; kInvalidArgument listing every error ("FILE:LINE:
// COL: ..." for syntax, "field.path: ..." for values) otherwise.
absl::StatusOr<RunConfig> LoadRunConfig(const std::string& path, const std::vector<std::string>& overrides,
                                        int world_size);

}  // namespace zeroshard::cli

#endif  // ZEROSHARD_CLI_RUN_CONFIG_H_
