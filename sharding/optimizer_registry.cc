#include "sharding/optimizer_registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sharding/optimizers/adamw.h"
#include "sharding/optimizers/lion.h"
#include "sharding/optimizers/sgd.h"

namespace zeroshard {

const std::vector<const Optimizer*>& RegisteredOptimizers() {
  // One line per optimizer.
  static const std::vector<const Optimizer*>* const registered = new std::vector<const Optimizer*>{
      &AdamWOptimizer(),
      &SgdOptimizer(),
      &LionOptimizer(),
  };
  return *registered;
}

std::string RegisteredOptimizerNames() {
  return absl::StrJoin(RegisteredOptimizers(), ", ",
                       [](std::string* out, const Optimizer* o) { absl::StrAppend(out, o->name()); });
}

absl::StatusOr<const Optimizer*> FindOptimizer(absl::string_view name) {
  for (const Optimizer* o : RegisteredOptimizers()) {
    if (o->name() == name) return o;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer '", name, "'; expected one of ", RegisteredOptimizerNames()));
}

std::vector<std::string> RegisteredStateCheckpointNames() {
  std::vector<std::string> names;
  for (const Optimizer* o : RegisteredOptimizers()) {
    for (const OptimizerStateKind& k : o->AllStateKinds()) {
      if (std::find(names.begin(), names.end(), k.checkpoint_name) == names.end()) names.push_back(k.checkpoint_name);
    }
  }
  return names;
}

absl::StatusOr<int64_t> OptimizerStateBytesPerElement(const OptimizerOptions& options) {
  absl::StatusOr<const Optimizer*> o = FindOptimizer(options.name);
  if (!o.ok()) return o.status();
  int64_t bytes = 0;
  for (const OptimizerStateKind& k : (*o)->StateKinds(options)) bytes += k.bytes_per_element;
  return bytes;
}

}  // namespace zeroshard
