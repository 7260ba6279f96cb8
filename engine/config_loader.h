// Reading a run configuration of any message type: text-format parsing with
// file:line:col errors, command-line overrides by descriptor walking, and the
// header that names the file's message type. Which message a file without a
// header holds is the model registry's rule (models/registry.h);
// docs/config_reference.md ("How a config names its model").
#ifndef ZEROSHARD_ENGINE_CONFIG_LOADER_H_
#define ZEROSHARD_ENGINE_CONFIG_LOADER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace zeroshard {

// The message type the text names in protobuf's text-format header comment
// "# proto-message: NAME", looked for among the comment and blank lines
// before the first field; empty when there is none.
std::string ConfigMessageName(absl::string_view text);

// Parses text-format `text` into `message` (cleared first). A syntax error
// or unknown field is kInvalidArgument "SOURCE:LINE:COL: message" (1-based),
// one line per error.
absl::Status ParseConfigText(absl::string_view text, absl::string_view source_name, google::protobuf::Message* message);

// Applies one override "PATH=VALUE" to any message, e.g.
// "engine.zero.stage=2", "data.train_path=/tmp/x.bin",
// "engine.precision.compute_dtype=BF16". Singular fields are replaced; for a
// repeated field the value is appended, and an empty VALUE clears the list.
// kInvalidArgument names the override and what is wrong (unknown field with
// the known ones, bad value).
absl::Status ApplyOverride(absl::string_view override_text, google::protobuf::Message* config);

// The file's contents; kNotFound "PATH: cannot read config file".
absl::StatusOr<std::string> ReadConfigFile(const std::string& path);

// Reads `path`, checks that its header names `message`'s type (a file
// without a header holds `headerless_message`, a full message name), parses
// it into `message` and applies `overrides` in order. Does not validate.
// kNotFound when the file cannot be read; kInvalidArgument for another
// message type (naming both), syntax or an override.
absl::Status LoadConfigMessage(const std::string& path, const std::vector<std::string>& overrides,
                               absl::string_view headerless_message, google::protobuf::Message* message);

// kInvalidArgument "PATH: invalid config:\n" + the errors, one a line; OK
// when there are none.
absl::Status InvalidConfig(const std::string& path, const std::vector<std::string>& errors);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_CONFIG_LOADER_H_
