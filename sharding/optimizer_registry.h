// The registered optimizers (sharding/optimizer.h), looked up by name.
#ifndef ZEROSHARD_SHARDING_OPTIMIZER_REGISTRY_H_
#define ZEROSHARD_SHARDING_OPTIMIZER_REGISTRY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sharding/optimizer.h"

namespace zeroshard {

// Every registered optimizer, in registration order; they live for the
// whole program.
const std::vector<const Optimizer*>& RegisteredOptimizers();

// "adamw, sgd, ...": the registered names, for error messages.
std::string RegisteredOptimizerNames();

// The optimizer called `name`; kInvalidArgument naming it and listing the
// registered ones otherwise.
absl::StatusOr<const Optimizer*> FindOptimizer(absl::string_view name);

// Every checkpoint name some registered optimizer's state uses (any
// options), each once, in registration order.
std::vector<std::string> RegisteredStateCheckpointNames();

// Bytes per parameter element of the state `options` keeps (8 for AdamW);
// kInvalidArgument for an unknown optimizer.
absl::StatusOr<int64_t> OptimizerStateBytesPerElement(const OptimizerOptions& options);

}  // namespace zeroshard

#endif  // ZEROSHARD_SHARDING_OPTIMIZER_REGISTRY_H_
