// Optimizer: the plug-in interface ShardedOptimizer is generic over. A
// plug-in declares its name, the config fields it takes and their
// defaults, its validation, its state kinds and its element-wise update;
// sharding, checkpoints, memory accounting and config validation read
// these and never name an optimizer. Plug-ins live in sharding/optimizers/
// and are listed once in sharding/optimizer_registry.cc
// (docs/architecture.md, "Adding an optimizer").
//
// Contract for Update: element-wise over the segment (element i of param
// and of every state tensor depends only on element i of the inputs), so a
// shard updates bitwise like the same elements of the whole tensor (the
// ZeRO stage 0-3 equality) and the result does not depend on the thread
// count. Plug-ins are stateless and thread-compatible.
#ifndef ZEROSHARD_SHARDING_OPTIMIZER_H_
#define ZEROSHARD_SHARDING_OPTIMIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/context.h"
#include "sharding/optimizer_state_kind.h"

namespace zeroshard {

// Hyperparameters of a run's optimizer. A plug-in reads the fields it takes
// (Optimizer::config_fields) plus weight_decay and no_decay_patterns, which
// every optimizer takes; the others keep their defaults.
struct OptimizerOptions {
  std::string name = "adamw";  // a registered optimizer (optimizer_registry.h)
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  // Each optimizer says how it applies it (AdamW, Lion: decoupled; SGD: L2).
  float weight_decay = 0.0f;
  float momentum = 0.0f;
  float dampening = 0.0f;
  bool nesterov = false;
  // Empty: the model's ParamSpec::no_weight_decay marks (weight_decay_policy.h).
  std::vector<std::string> no_decay_patterns;
};

// One segment's update: n elements of param and grad, and one pointer per
// state kind (StateKinds order) to the segment's n state elements.
struct OptimizerSegment {
  float* param = nullptr;
  const float* grad = nullptr;
  absl::Span<float* const> state;
  int64_t n = 0;
  float lr = 0;            // the schedule's lr x the parameter group's lr_mult
  float weight_decay = 0;  // options.weight_decay x the group's weight_decay_mult
  int64_t step = 1;        // 1-based count of updates, this one included
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // Registered name, lower case: the config's enum value lower-cased
  // ("adamw" for ADAMW), recorded in checkpoint manifests.
  virtual absl::string_view name() const = 0;
  // The OptimizerConfig fields it takes besides those every optimizer takes
  // (type, lr, weight_decay, no_decay_patterns, grad_clip), by field name.
  // Setting any other field is a config error.
  virtual std::vector<std::string> config_fields() const = 0;
  // Options holding its name and its defaults for config_fields(), used
  // where the config leaves a field unset.
  virtual OptimizerOptions Defaults() const = 0;
  // kInvalidArgument naming the first bad value and the expected range.
  virtual absl::Status Validate(const OptimizerOptions& options) const = 0;
  // The state it keeps for these options (none for plain SGD).
  virtual std::vector<OptimizerStateKind> StateKinds(const OptimizerOptions& options) const = 0;
  // Every kind it keeps under some options (manifest validation); default
  // StateKinds(Defaults()).
  virtual std::vector<OptimizerStateKind> AllStateKinds() const { return StateKinds(Defaults()); }
  // How errors describe a run of it ("sgd with momentum"); default name().
  virtual std::string Describe(const OptimizerOptions& options) const { return std::string(name()); }
  // Updates one segment in place (contract above). `options` passed
  // Validate; the kernel's errors otherwise.
  virtual absl::Status Update(const kernels::KernelContext& ctx, const OptimizerOptions& options,
                              const OptimizerSegment& segment) const = 0;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_SHARDING_OPTIMIZER_H_
