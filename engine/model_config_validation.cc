#include "engine/model_config_validation.h"

#include <algorithm>
#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeroshard {

namespace {

void CheckPipeline(const ParallelConfig& p, int units, std::vector<std::string>* errors) {
  if (p.pp() <= 1) return;  // pp 1 takes no pipeline fields (EngineConfigErrors)
  const int64_t chunks = int64_t{p.pp()} * p.virtual_stages();
  if (chunks > units) {
    if (p.virtual_stages() == 1) {
      errors->push_back(absl::StrCat("engine.parallel.pp: ", p.pp(), " exceeds the model's ", units, " units"));
    } else {
      errors->push_back(absl::StrCat("engine.parallel.pp: ", p.pp(), " x virtual_stages ", p.virtual_stages(), " = ",
                                     chunks, " chunks exceed the model's ", units, " units"));
    }
  }
  if (p.pp_partition_size() == 0) return;
  int64_t sum = 0;
  for (int n : p.pp_partition()) sum += n;
  if (sum != units) {
    errors->push_back(
        absl::StrCat("engine.parallel.pp_partition: sums to ", sum, ", expected the model's ", units, " units"));
  }
}

}  // namespace

std::vector<std::string> EngineModelErrors(const EngineConfig& engine, const Model& model) {
  std::vector<std::string> errors;
  const ActivationCheckpointingConfig& ac = engine.activation_checkpointing();
  std::vector<std::string> names;
  for (const std::unique_ptr<Unit>& unit : model.units) names.push_back(unit->name());
  std::vector<std::string> selective_names;
  for (const std::unique_ptr<Unit>& unit : model.units) {
    if (unit->SupportsSelectiveCheckpointing()) selective_names.push_back(unit->name());
  }
  if (ac.policy() == ActivationCheckpointingConfig::NAMED) {
    for (const std::string& u : ac.units()) {
      const auto it = std::find(names.begin(), names.end(), u);
      if (it == names.end()) {
        errors.push_back(absl::StrCat("engine.activation_checkpointing.units: '", u,
                                      "' is not a unit of the model; expected one of ", absl::StrJoin(names, ", ")));
      } else if (ac.selective() && !model.units[it - names.begin()]->SupportsSelectiveCheckpointing()) {
        errors.push_back(absl::StrCat(
            "engine.activation_checkpointing.units: '", u, "' has no selective form (selective: true); ",
            selective_names.empty() ? std::string("no unit of the model has one")
                                    : absl::StrCat("expected one of ", absl::StrJoin(selective_names, ", "))));
      }
    }
  }
  CheckPipeline(engine.parallel(), static_cast<int>(names.size()), &errors);
  return errors;
}

}  // namespace zeroshard
