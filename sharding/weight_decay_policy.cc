#include "sharding/weight_decay_policy.h"

#include <utility>

#include "absl/strings/match.h"

namespace zeroshard {

WeightDecayPolicy::WeightDecayPolicy(std::vector<std::string> no_decay_patterns)
    : patterns_(std::move(no_decay_patterns)) {}

bool WeightDecayPolicy::Decays(absl::string_view name, bool model_no_decay) const {
  if (patterns_.empty()) return !model_no_decay;
  for (const std::string& p : patterns_) {
    if (p.empty()) continue;
    if (absl::EndsWith(name, p)) return false;
    const char last = p.back();
    if ((last == '.' || last == '_') && absl::StrContains(name, p)) return false;
  }
  return true;
}

}  // namespace zeroshard
