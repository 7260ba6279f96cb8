#include "nn/model.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeroshard {

int64_t Model::num_params() const {
  int64_t n = 0;
  for (const auto& unit : units) {
    for (const ParamSpec& p : unit->params()) n += p.numel();
  }
  return n;
}

absl::StatusOr<ParamLocation> Model::FindParam(absl::string_view name) const {
  for (int u = 0; u < static_cast<int>(units.size()); ++u) {
    const auto& params = units[u]->params();
    for (int p = 0; p < static_cast<int>(params.size()); ++p) {
      if (params[p].name == name) return ParamLocation{u, p};
    }
  }
  return absl::NotFoundError(absl::StrCat("no parameter named \"", name, "\" in the model"));
}

absl::Status Model::Validate() const {
  if (units.empty()) return absl::InvalidArgumentError("model has no units");
  std::set<std::string> names;
  std::set<std::string> unit_names;
  for (const auto& unit : units) {
    if (!unit_names.insert(unit->name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate unit name \"", unit->name(), "\""));
    }
    for (const ParamSpec& p : unit->params()) {
      if (!names.insert(p.name).second) {
        return absl::InvalidArgumentError(absl::StrCat("duplicate parameter name \"", p.name, "\""));
      }
      if (p.shape.empty()) return absl::InvalidArgumentError(absl::StrCat("parameter ", p.name, " has no shape"));
      for (int64_t d : p.shape) {
        if (d < 1) {
          return absl::InvalidArgumentError(
              absl::StrCat("parameter ", p.name, " has shape [", absl::StrJoin(p.shape, ", "), "]; dims must be >= 1"));
        }
      }
    }
  }
  for (const auto& unit : units) {
    for (const std::string& b : unit->borrowed_params()) {
      auto loc = FindParam(b);
      if (!loc.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("unit ", unit->name(), " borrows \"", b, "\", which no unit owns"));
      }
      if (units[loc->unit].get() == unit.get()) {
        return absl::InvalidArgumentError(absl::StrCat("unit ", unit->name(), " borrows its own parameter ", b));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace zeroshard
