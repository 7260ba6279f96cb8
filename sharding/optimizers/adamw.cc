#include "sharding/optimizers/adamw.h"

#include "absl/strings/str_cat.h"
#include "kernels/optimizer.h"

namespace zeroshard {
namespace {

class AdamW final : public Optimizer {
 public:
  absl::string_view name() const override { return "adamw"; }
  std::vector<std::string> config_fields() const override { return {"beta1", "beta2", "eps"}; }
  // The proto's defaults (proto/config.proto).
  OptimizerOptions Defaults() const override {
    OptimizerOptions o;
    o.name = "adamw";
    o.beta1 = 0.9f;
    o.beta2 = 0.95f;
    o.eps = 1e-8f;
    return o;
  }
  absl::Status Validate(const OptimizerOptions& o) const override {
    if (!(o.beta1 >= 0 && o.beta1 < 1)) {
      return absl::InvalidArgumentError(absl::StrCat("beta1 is ", o.beta1, ", expected in [0, 1)"));
    }
    if (!(o.beta2 >= 0 && o.beta2 < 1)) {
      return absl::InvalidArgumentError(absl::StrCat("beta2 is ", o.beta2, ", expected in [0, 1)"));
    }
    if (!(o.eps > 0)) return absl::InvalidArgumentError(absl::StrCat("eps is ", o.eps, ", expected > 0"));
    if (!(o.weight_decay >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat("weight_decay is ", o.weight_decay, ", expected >= 0"));
    }
    return absl::OkStatus();
  }
  std::vector<OptimizerStateKind> StateKinds(const OptimizerOptions&) const override {
    return {{"exp_avg", DType::kF32, 4, "exp_avg"}, {"exp_avg_sq", DType::kF32, 4, "exp_avg_sq"}};
  }
  absl::Status Update(const kernels::KernelContext& ctx, const OptimizerOptions& o,
                      const OptimizerSegment& s) const override {
    const kernels::AdamWHyper h{s.lr, o.beta1, o.beta2, o.eps, s.weight_decay, s.step};
    return kernels::AdamWUpdate(ctx, s.param, s.grad, s.state[0], s.state[1], s.n, h);
  }
};

}  // namespace

const Optimizer& AdamWOptimizer() {
  static const AdamW* const instance = new AdamW();
  return *instance;
}

}  // namespace zeroshard
