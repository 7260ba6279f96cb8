#include "models/mlp_lm/mlp_lm.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "nn/cross_entropy.h"
#include "nn/embedding.h"
#include "nn/gelu.h"
#include "nn/linear.h"

namespace zeroshard {
namespace {

// Activations a unit keeps for its backward, counted as kActivations.
struct Kept : SavedActivations {
  std::vector<Buffer> buffers;
  int64_t bytes() const override {
    int64_t n = 0;
    for (const Buffer& b : buffers) n += b.bytes();
    return n;
  }
};

absl::StatusOr<Buffer> Activation(const ComputeContext& ctx, int64_t numel) {
  return Buffer::AllocateZeroed(ctx.tracker, MemoryCategory::kActivations, ctx.kernels.device, DType::kF32, numel);
}

// Units keep their name and parameter list in NamedUnit (nn/unit.h).
class UnitWithParams : public NamedUnit {
 public:
  UnitWithParams(std::string name, std::vector<ParamSpec> params) : NamedUnit(std::move(name)) {
    params_ = std::move(params);
    // Biases (the 1-D parameters) get no weight decay.
    for (ParamSpec& p : params_) p.no_weight_decay = p.shape.size() == 1;
  }
};

class Embed : public UnitWithParams {
 public:
  Embed(int v, int t, int c)
      : UnitWithParams("embed", {{"wte.weight", {v, c}}, {"wpe.weight", {t, c}}}), layer_(v, t, c), c_(c) {}
  absl::Status Forward(const UnitContext& ctx, absl::Span<const TensorView> p, const Batch& batch,
                       absl::Span<const TensorView>, UnitOutput* out,
                       std::unique_ptr<SavedActivations>* saved) const override {
    ASSIGN_OR_RETURN(const TensorView tokens, batch.Get("inputs"));
    ASSIGN_OR_RETURN(Buffer x, Activation(ctx.compute, tokens.numel() * c_));
    RETURN_IF_ERROR(
        layer_.Forward(ctx.compute, p[0], p[1], tokens, ViewOf(x, {tokens.shape[0], tokens.shape[1], c_})));
    out->activations.Add(std::move(x), {tokens.shape[0], tokens.shape[1], c_});
    *saved = std::make_unique<Kept>();
    return absl::OkStatus();
  }
  absl::Status Backward(const UnitContext& ctx, absl::Span<const TensorView>, absl::Span<const TensorView> g,
                        const Batch& batch, const SavedActivations&, absl::Span<const TensorView> dout,
                        ActivationPack*) const override {
    ASSIGN_OR_RETURN(const TensorView tokens, batch.Get("inputs"));
    return layer_.Backward(ctx.compute, tokens, dout[0], g[0], g[1]);
  }

 private:
  Embedding layer_;
  int64_t c_;
};

class Mlp : public UnitWithParams {
 public:
  Mlp(int i, int c, float proj_std)
      : UnitWithParams(absl::StrCat("mlp.", i),
                       {{absl::StrCat("mlp.", i, ".fc.weight"), {c, 4 * c}},
                        {absl::StrCat("mlp.", i, ".fc.bias"), {4 * c}, InitKind::kZeros},
                        {absl::StrCat("mlp.", i, ".proj.weight"), {4 * c, c}, InitKind::kNormal, proj_std},
                        {absl::StrCat("mlp.", i, ".proj.bias"), {c}, InitKind::kZeros}}),
        fc_(name() + ".fc", c, 4 * c), proj_(name() + ".proj", 4 * c, c), c_(c) {}

  absl::Status Forward(const UnitContext& uctx, absl::Span<const TensorView> p, const Batch&,
                       absl::Span<const TensorView> ins, UnitOutput* out,
                       std::unique_ptr<SavedActivations>* saved) const override {
    const ComputeContext& ctx = uctx.compute;
    const TensorView& in = ins[0];
    const int64_t n = in.numel() / c_;
    auto kept = std::make_unique<Kept>();
    kept->buffers.resize(3);  // x, fc(x), gelu(fc(x))
    ASSIGN_OR_RETURN(kept->buffers[0], Activation(ctx, n * c_));
    ASSIGN_OR_RETURN(kept->buffers[1], Activation(ctx, n * 4 * c_));
    ASSIGN_OR_RETURN(kept->buffers[2], Activation(ctx, n * 4 * c_));
    ASSIGN_OR_RETURN(Buffer y_buf, Activation(ctx, n * c_));
    const TensorView x = ViewOf(kept->buffers[0], {n, c_}), h = ViewOf(kept->buffers[1], {n, 4 * c_}),
                     g = ViewOf(kept->buffers[2], {n, 4 * c_}), y = ViewOf(y_buf, {n, c_});
    RETURN_IF_ERROR(DeviceCopy(x.data, x.device, in.data, in.device, x.bytes()));
    RETURN_IF_ERROR(fc_.Forward(ctx, p[0], p[1], x, h));
    RETURN_IF_ERROR(gelu_.Forward(ctx, h, g));
    RETURN_IF_ERROR(proj_.Forward(ctx, p[2], p[3], g, y));
    for (int64_t i = 0; i < n * c_; ++i) y.as<float>()[i] += x.as<float>()[i];  // residual (CPU f32)
    out->activations.Add(std::move(y_buf), in.shape);
    *saved = std::move(kept);
    return absl::OkStatus();
  }

  absl::Status Backward(const UnitContext& uctx, absl::Span<const TensorView> p, absl::Span<const TensorView> grads,
                        const Batch&, const SavedActivations& saved, absl::Span<const TensorView> douts,
                        ActivationPack* grad_in) const override {
    const ComputeContext& ctx = uctx.compute;
    const TensorView& dy = douts[0];
    const Kept& kept = static_cast<const Kept&>(saved);
    const int64_t n = dy.numel() / c_;
    const TensorView x = ViewOf((kept.buffers[0]), {n, c_});
    const TensorView h = ViewOf((kept.buffers[1]), {n, 4 * c_});
    const TensorView g = ViewOf((kept.buffers[2]), {n, 4 * c_});
    ASSIGN_OR_RETURN(Buffer dg_buf, Activation(ctx, n * 4 * c_));
    ASSIGN_OR_RETURN(Buffer dx_buf, Activation(ctx, n * c_));
    const TensorView dg = ViewOf(dg_buf, {n, 4 * c_}), dx = ViewOf(dx_buf, {n, c_});
    const TensorView dy2 = {dy.data, dy.dtype, {n, c_}, dy.device};
    RETURN_IF_ERROR(proj_.Backward(ctx, p[2], g, dy2, dg, grads[2], grads[3]));
    RETURN_IF_ERROR(gelu_.Backward(ctx, h, dg, dg));
    RETURN_IF_ERROR(fc_.Backward(ctx, p[0], x, dg, dx, grads[0], grads[1]));
    for (int64_t i = 0; i < n * c_; ++i) dx.as<float>()[i] += dy.as<float>()[i];  // residual path
    grad_in->Add(std::move(dx_buf), dy.shape);
    return absl::OkStatus();
  }

 private:
  Linear fc_, proj_;
  Gelu gelu_;
  int64_t c_;
};

// Cross-entropy summed over the targets >= 0 and their count: the engine
// turns that into the mean over every rank's tokens.
class Head : public UnitWithParams {
 public:
  Head(int v, int c)
      : UnitWithParams("head", {{"out.weight", {c, v}}, {"out.bias", {v}, InitKind::kZeros}}),
        out_("head.out", c, v), loss_(v), v_(v), c_(c) {}

  double NominalLossWeight(const Batch& batch) const override {
    const TensorView* targets = batch.Find("targets");
    return targets == nullptr ? 0.0 : static_cast<double>(targets->numel());
  }

  absl::Status Forward(const UnitContext& uctx, absl::Span<const TensorView> p, const Batch& batch,
                       absl::Span<const TensorView> ins, UnitOutput* out,
                       std::unique_ptr<SavedActivations>* saved) const override {
    const ComputeContext& ctx = uctx.compute;
    ASSIGN_OR_RETURN(const TensorView batch_targets, batch.Get("targets"));
    const int64_t n = batch_targets.numel();
    auto kept = std::make_unique<Kept>();
    kept->buffers.resize(4);  // x, logits, per-token losses, log-sum-exp
    ASSIGN_OR_RETURN(kept->buffers[0], Activation(ctx, n * c_));
    ASSIGN_OR_RETURN(kept->buffers[1], Activation(ctx, n * v_));
    ASSIGN_OR_RETURN(kept->buffers[2], Activation(ctx, n));
    ASSIGN_OR_RETURN(kept->buffers[3], Activation(ctx, n));
    ASSIGN_OR_RETURN(Buffer sums, Activation(ctx, 2));  // {loss sum, rows with a target}
    const TensorView x = ViewOf(kept->buffers[0], {n, c_}), logits = ViewOf(kept->buffers[1], {n, v_});
    const TensorView targets = {batch_targets.data, DType::kI32, {n}, batch_targets.device};
    RETURN_IF_ERROR(DeviceCopy(x.data, x.device, ins[0].data, ins[0].device, x.bytes()));
    RETURN_IF_ERROR(out_.Forward(ctx, p[0], p[1], x, logits));
    RETURN_IF_ERROR(loss_.Forward(ctx, logits, targets, ViewOf(kept->buffers[2], {n}), ViewOf(kept->buffers[3], {n}),
                                  ViewOf(sums, {2})));
    out->loss.loss = WeightedSum{sums.as<float>()[0], sums.as<float>()[1]};  // CPU f32, like the residuals
    *saved = std::move(kept);
    return absl::OkStatus();
  }

  absl::Status Backward(const UnitContext& uctx, absl::Span<const TensorView> p, absl::Span<const TensorView> grads,
                        const Batch& batch, const SavedActivations& saved, absl::Span<const TensorView> dsum,
                        ActivationPack* grad_in) const override {
    const ComputeContext& ctx = uctx.compute;
    const Kept& kept = static_cast<const Kept&>(saved);
    ASSIGN_OR_RETURN(const TensorView batch_targets, batch.Get("targets"));
    const int64_t n = batch_targets.numel();
    const TensorView x = ViewOf((kept.buffers[0]), {n, c_});
    const TensorView logits = ViewOf((kept.buffers[1]), {n, v_});
    const TensorView targets = {batch_targets.data, DType::kI32, {n}, batch_targets.device};
    ASSIGN_OR_RETURN(Buffer dlogits_buf, Activation(ctx, n * v_));
    ASSIGN_OR_RETURN(Buffer dx_buf, Activation(ctx, n * c_));
    const TensorView dlogits = ViewOf(dlogits_buf, {n, v_});
    // d(objective)/d(each row's loss) is d(objective)/d(loss sum).
    RETURN_IF_ERROR(loss_.Backward(ctx, logits, ViewOf((kept.buffers[3]), {n}), targets, dsum[0].as<float>()[0],
                                   dlogits));
    RETURN_IF_ERROR(out_.Backward(ctx, p[0], x, dlogits, ViewOf(dx_buf, {n, c_}), grads[0], grads[1]));
    grad_in->Add(std::move(dx_buf), {batch_targets.shape[0], batch_targets.shape[1], c_});
    return absl::OkStatus();
  }

 private:
  Linear out_;
  CrossEntropy loss_;
  int64_t v_, c_;
};

}  // namespace

std::unique_ptr<Model> BuildMlpLm(int n_layer, int vocab_size, int seq_len, int channels) {
  auto model = std::make_unique<Model>();
  model->units.push_back(std::make_unique<Embed>(vocab_size, seq_len, channels));
  for (int i = 0; i < n_layer; ++i) {
    model->units.push_back(std::make_unique<Mlp>(i, channels, 0.02f / std::sqrt(2.0f * n_layer)));
  }
  model->units.push_back(std::make_unique<Head>(vocab_size, channels));
  return model;
}

}  // namespace zeroshard
