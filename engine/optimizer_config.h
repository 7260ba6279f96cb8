// The engine.optimizer section, read through the registered optimizer
// plug-ins (sharding/optimizer_registry.h): the enum value names the plug-in
// (lower-cased), the fields it does not take must be unset, and the fields
// it takes that are unset get the plug-in's defaults (proto2 has-bits), so
// Lion's beta2 is 0.99 when unset while AdamW keeps the proto's 0.95.
#ifndef ZEROSHARD_ENGINE_OPTIMIZER_CONFIG_H_
#define ZEROSHARD_ENGINE_OPTIMIZER_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/engine_config.pb.h"
#include "sharding/optimizer.h"

namespace zeroshard {

// "adamw" for ADAMW: the registered name the enum value selects.
std::string OptimizerName(OptimizerConfig::Type type);

// Options for `config`'s optimizer. kInvalidArgument (field path first)
// for an enum value with no registered plug-in, listing the registered
// ones. Does not check ranges or fields the optimizer does not take
// (OptimizerConfigErrors does).
absl::StatusOr<OptimizerOptions> OptimizerOptionsFromConfig(const OptimizerConfig& config);

// The section's errors, each starting with its field path: ranges, an
// unregistered type, and every field set that the optimizer does not take.
std::vector<std::string> OptimizerConfigErrors(const OptimizerConfig& config);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_OPTIMIZER_CONFIG_H_
