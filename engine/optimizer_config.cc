#include "engine/optimizer_config.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/config_checker.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "sharding/optimizer_registry.h"

namespace zeroshard {
namespace {

// Fields every optimizer takes; a plug-in lists the others it takes.
constexpr const char* kCommonFields[] = {"type", "lr", "weight_decay", "no_decay_patterns", "grad_clip"};

bool IsCommon(const std::string& field) {
  return std::find(std::begin(kCommonFields), std::end(kCommonFields), field) != std::end(kCommonFields);
}

}  // namespace

std::string OptimizerName(OptimizerConfig::Type type) {
  return absl::AsciiStrToLower(OptimizerConfig::Type_Name(type));
}

absl::StatusOr<OptimizerOptions> OptimizerOptionsFromConfig(const OptimizerConfig& c) {
  absl::StatusOr<const Optimizer*> plugin = FindOptimizer(OptimizerName(c.type()));
  if (!plugin.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("engine.optimizer.type: ", plugin.status().message()));
  }
  OptimizerOptions o = (*plugin)->Defaults();
  if (c.has_beta1()) o.beta1 = static_cast<float>(c.beta1());
  if (c.has_beta2()) o.beta2 = static_cast<float>(c.beta2());
  if (c.has_eps()) o.eps = static_cast<float>(c.eps());
  if (c.has_momentum()) o.momentum = static_cast<float>(c.momentum());
  if (c.has_dampening()) o.dampening = static_cast<float>(c.dampening());
  if (c.has_nesterov()) o.nesterov = c.nesterov();
  o.weight_decay = static_cast<float>(c.weight_decay());
  o.no_decay_patterns.assign(c.no_decay_patterns().begin(), c.no_decay_patterns().end());
  return o;
}

std::vector<std::string> OptimizerConfigErrors(const OptimizerConfig& o) {
  ConfigChecker c;
  c.Positive("engine.optimizer.lr", o.lr());
  c.HalfOpen01("engine.optimizer.beta1", o.beta1());
  c.HalfOpen01("engine.optimizer.beta2", o.beta2());
  c.Positive("engine.optimizer.eps", o.eps());
  c.AtLeast("engine.optimizer.weight_decay", o.weight_decay(), 0);
  c.HalfOpen01("engine.optimizer.momentum", o.momentum());
  c.HalfOpen01("engine.optimizer.dampening", o.dampening());
  c.AtLeast("engine.optimizer.grad_clip", o.grad_clip(), 0);
  if (o.nesterov() && (o.momentum() <= 0 || o.dampening() != 0)) {
    c.Add(absl::StrCat("engine.optimizer.nesterov: needs momentum > 0 and dampening 0; got momentum ", o.momentum(),
                       ", dampening ", o.dampening()));
  }
  for (int i = 0; i < o.no_decay_patterns_size(); ++i) {
    if (o.no_decay_patterns(i).empty()) c.Add(absl::StrCat("engine.optimizer.no_decay_patterns[", i, "]: empty pattern"));
  }
  const std::string type = OptimizerConfig::Type_Name(o.type());
  absl::StatusOr<const Optimizer*> plugin = FindOptimizer(OptimizerName(o.type()));
  if (!plugin.ok()) {
    c.Add(absl::StrCat("engine.optimizer.type: ", type, " has no registered optimizer; registered: ",
                       RegisteredOptimizerNames()));
    return c.Take();
  }
  // A field the optimizer does not take would be ignored: refuse it.
  const std::vector<std::string> takes = (*plugin)->config_fields();
  const google::protobuf::Reflection* reflection = o.GetReflection();
  const google::protobuf::Descriptor* d = o.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    if (IsCommon(f->name()) || std::find(takes.begin(), takes.end(), f->name()) != takes.end()) continue;
    if (!reflection->HasField(o, f)) continue;
    c.Add(absl::StrCat("engine.optimizer.", f->name(), ": set, but ", type, " does not take it; expected unset (",
                       type, " takes ", takes.empty() ? std::string("none") : absl::StrJoin(takes, ", "),
                       " besides lr, weight_decay, no_decay_patterns, grad_clip)"));
  }
  return c.Take();
}

}  // namespace zeroshard
