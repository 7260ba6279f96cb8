#include "sharding/weight_decay_policy.h"

#include <utility>

#include "absl/strings/match.h"

namespace zeroshard {

WeightDecayPolicy::WeightDecayPolicy(std::vector<std::string> no_decay_patterns)
    : patterns_(std::move(no_decay_patterns)) {
  if (patterns_.empty()) patterns_ = {".bias", "ln_"};
}

bool WeightDecayPolicy::Decays(absl::string_view name) const {
  for (const std::string& p : patterns_) {
    if (p.empty()) continue;
    if (absl::EndsWith(name, p)) return false;
    const char last = p.back();
    if ((last == '.' || last == '_') && absl::StrContains(name, p)) return false;
  }
  return true;
}

}  // namespace zeroshard
