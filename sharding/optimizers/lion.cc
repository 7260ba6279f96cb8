#include "sharding/optimizers/lion.h"

#include "absl/strings/str_cat.h"
#include "kernels/lion.h"

namespace zeroshard {
namespace {

class Lion final : public Optimizer {
 public:
  absl::string_view name() const override { return "lion"; }
  std::vector<std::string> config_fields() const override { return {"beta1", "beta2"}; }
  // Chen et al. 2023's defaults.
  OptimizerOptions Defaults() const override {
    OptimizerOptions o;
    o.name = "lion";
    o.beta1 = 0.9f;
    o.beta2 = 0.99f;
    return o;
  }
  absl::Status Validate(const OptimizerOptions& o) const override {
    if (!(o.beta1 >= 0 && o.beta1 < 1)) {
      return absl::InvalidArgumentError(absl::StrCat("beta1 is ", o.beta1, ", expected in [0, 1)"));
    }
    if (!(o.beta2 >= 0 && o.beta2 < 1)) {
      return absl::InvalidArgumentError(absl::StrCat("beta2 is ", o.beta2, ", expected in [0, 1)"));
    }
    if (!(o.weight_decay >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat("weight_decay is ", o.weight_decay, ", expected >= 0"));
    }
    return absl::OkStatus();
  }
  std::vector<OptimizerStateKind> StateKinds(const OptimizerOptions&) const override {
    return {{"exp_avg", DType::kF32, 4, "exp_avg"}};
  }
  absl::Status Update(const kernels::KernelContext& ctx, const OptimizerOptions& o,
                      const OptimizerSegment& s) const override {
    const kernels::LionHyper h{s.lr, o.beta1, o.beta2, s.weight_decay};
    return kernels::LionUpdate(ctx, s.param, s.grad, s.state[0], s.n, h);
  }
};

}  // namespace

const Optimizer& LionOptimizer() {
  static const Lion* const instance = new Lion();
  return *instance;
}

}  // namespace zeroshard
