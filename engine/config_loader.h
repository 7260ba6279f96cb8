// Reading a run configuration: text-format parsing with file:line:col
// errors, command-line overrides, then validation.
#ifndef ZEROSHARD_ENGINE_CONFIG_LOADER_H_
#define ZEROSHARD_ENGINE_CONFIG_LOADER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/config.pb.h"

namespace zeroshard {

// Parses text-format `text`. A syntax error or unknown field is
// kInvalidArgument "SOURCE:LINE:COL: message" (1-based), one line per error.
absl::StatusOr<TrainConfig> ParseTrainConfig(absl::string_view text, absl::string_view source_name);

// Applies one override "PATH=VALUE", e.g. "engine.zero.stage=2",
// "data.train_path=/tmp/x.bin", "engine.precision.compute_dtype=BF16".
// Singular fields are replaced; for a repeated field the value is appended,
// and an empty VALUE clears the list. kInvalidArgument names the override
// and what is wrong (unknown field with the known ones, bad value).
absl::Status ApplyOverride(absl::string_view override_text, TrainConfig* config);

// Reads and parses `path`, applies `overrides` in order, then validates
// (see config_validation.h) for `world_size` ranks (-1: don't check the
// world). kNotFound if the file can't be read; kInvalidArgument with every
// error otherwise.
absl::StatusOr<TrainConfig> LoadTrainConfig(const std::string& path,
                                             const std::vector<std::string>& overrides = {},
                                             int world_size = -1);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_CONFIG_LOADER_H_
