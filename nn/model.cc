#include "nn/model.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"

namespace zeroshard {

int64_t Model::num_params() const {
  int64_t n = 0;
  for (const auto& unit : units) {
    for (const ParamSpec& p : unit->params()) n += p.numel();
  }
  return n;
}

int64_t Model::num_logical_params() const {
  int64_t n = 0;
  for (const auto& unit : units) {
    for (const ParamSpec& p : unit->params()) n += p.logical_numel();
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

bool Model::IgnoresImportTensor(absl::string_view name) const {
  for (const std::string& pattern : ignored_import_tensors) {
    if (!pattern.empty() && pattern[0] == '*' ? absl::EndsWith(name, pattern.substr(1)) : name == pattern) return true;
  }
  return false;
}

absl::Status Model::Validate(int tp_size) const {
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
      if (p.trainable != unit->params().front().trainable) {
        return absl::InvalidArgumentError(absl::StrCat(
            "unit \"", unit->name(), "\" mixes trainable and frozen parameters (", unit->params().front().name, " is ",
            unit->params().front().trainable ? "trainable" : "frozen", ", ", p.name, " is ",
            p.trainable ? "trainable" : "frozen", "); put frozen parameters in a unit of their own"));
      }
      if (!(p.lr_mult > 0) || (p.weight_decay_mult.has_value() && !(*p.weight_decay_mult >= 0))) {
        return absl::InvalidArgumentError(absl::StrCat("parameter ", p.name, " has lr_mult ", p.lr_mult,
                                                       " and weight_decay_mult ",
                                                       p.weight_decay_mult.has_value()
                                                           ? absl::StrCat(*p.weight_decay_mult)
                                                           : std::string("unset"),
                                                       ", expected lr_mult > 0 and weight_decay_mult >= 0"));
      }
      absl::Status logical = ValidateLogicalShape(p);
      if (!logical.ok()) return logical;
      absl::StatusOr<std::vector<int64_t>> local = LocalShape(p, tp_size);
      if (!local.ok()) return local.status();
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
