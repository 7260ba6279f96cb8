#include "sharding/optimizers/sgd.h"

#include "absl/strings/str_cat.h"
#include "kernels/optimizer.h"

namespace zeroshard {
namespace {

OptimizerStateKind Momentum() { return {"momentum", DType::kF32, 4, "momentum"}; }

class Sgd final : public Optimizer {
 public:
  absl::string_view name() const override { return "sgd"; }
  std::vector<std::string> config_fields() const override { return {"momentum", "dampening", "nesterov"}; }
  OptimizerOptions Defaults() const override {
    OptimizerOptions o;
    o.name = "sgd";
    return o;
  }
  absl::Status Validate(const OptimizerOptions& o) const override {
    if (!(o.momentum >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat("momentum is ", o.momentum, ", expected >= 0"));
    }
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
      return absl::InvalidArgumentError(absl::StrCat("nesterov needs momentum > 0 and dampening 0, got momentum ",
                                                     o.momentum, " and dampening ", o.dampening));
    }
    if (!(o.weight_decay >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat("weight_decay is ", o.weight_decay, ", expected >= 0"));
    }
    return absl::OkStatus();
  }
  std::vector<OptimizerStateKind> StateKinds(const OptimizerOptions& o) const override {
    if (o.momentum > 0) return {Momentum()};
    return {};
  }
  std::vector<OptimizerStateKind> AllStateKinds() const override { return {Momentum()}; }
  std::string Describe(const OptimizerOptions& o) const override {
    return o.momentum > 0 ? "sgd with momentum" : "sgd without momentum";
  }
  absl::Status Update(const kernels::KernelContext& ctx, const OptimizerOptions& o,
                      const OptimizerSegment& s) const override {
    // SGD initialises its momentum buffer on the first update.
    const kernels::SgdHyper h{s.lr, o.momentum, o.dampening, s.weight_decay, o.nesterov, s.step == 1};
    return kernels::SgdUpdate(ctx, s.param, s.grad, s.state.empty() ? nullptr : s.state[0], s.n, h);
  }
};

}  // namespace

const Optimizer& SgdOptimizer() {
  static const Sgd* const instance = new Sgd();
  return *instance;
}

}  // namespace zeroshard
