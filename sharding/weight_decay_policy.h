// Which parameters get weight decay, decided by name patterns.
//
// A pattern matches a name that ends with it, or that contains it when the
// pattern ends in a separator ('.' or '_'): ".bias" matches "h.0.attn.c_attn.bias",
// "ln_" matches "h.0.ln_1.weight" and "ln_f.bias". An empty pattern list means
// the defaults {".bias", "ln_"}: no decay for biases and LayerNorm parameters.
#ifndef ZEROSHARD_SHARDING_WEIGHT_DECAY_POLICY_H_
#define ZEROSHARD_SHARDING_WEIGHT_DECAY_POLICY_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace zeroshard {

class WeightDecayPolicy {
 public:
  explicit WeightDecayPolicy(std::vector<std::string> no_decay_patterns = {});

  bool Decays(absl::string_view param_name) const;
  const std::vector<std::string>& no_decay_patterns() const { return patterns_; }

 private:
  std::vector<std::string> patterns_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_SHARDING_WEIGHT_DECAY_POLICY_H_
