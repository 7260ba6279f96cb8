// Which parameters get weight decay: the config's name patterns when it
// lists any, otherwise the model's own marks (ParamSpec::no_weight_decay,
// which the model sets for its biases and normalisation weights).
//
// A pattern matches a name that ends with it, or that contains it when the
// pattern ends in a separator ('.' or '_'): ".bias" matches "blocks.0.fc.bias",
// "norm_" matches "blocks.0.norm_1.weight". Patterns replace the model's
// marks entirely.
#ifndef ZEROSHARD_SHARDING_WEIGHT_DECAY_POLICY_H_
#define ZEROSHARD_SHARDING_WEIGHT_DECAY_POLICY_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace zeroshard {

class WeightDecayPolicy {
 public:
  explicit WeightDecayPolicy(std::vector<std::string> no_decay_patterns = {});

  // Whether the parameter `param_name`, which its model marks
  // `model_no_decay`, decays: by the patterns when there are any, else
  // !model_no_decay.
  bool Decays(absl::string_view param_name, bool model_no_decay = false) const;
  const std::vector<std::string>& no_decay_patterns() const { return patterns_; }

 private:
  std::vector<std::string> patterns_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_SHARDING_WEIGHT_DECAY_POLICY_H_
