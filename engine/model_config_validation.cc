#include "engine/model_config_validation.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeroshard {

std::vector<std::string> EngineModelErrors(const EngineConfig& engine, const Model& model) {
  std::vector<std::string> errors;
  const ActivationCheckpointingConfig& ac = engine.activation_checkpointing();
  if (ac.policy() != ActivationCheckpointingConfig::NAMED) return errors;
  std::vector<std::string> names;
  for (const std::unique_ptr<Unit>& unit : model.units) names.push_back(unit->name());
  for (const std::string& u : ac.units()) {
    if (std::find(names.begin(), names.end(), u) != names.end()) continue;
    errors.push_back(absl::StrCat("engine.activation_checkpointing.units: '", u,
                                  "' is not a unit of the model; expected one of ", absl::StrJoin(names, ", ")));
  }
  return errors;
}

}  // namespace zeroshard
