#include "engine/testing/toy_model.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zeroshard {
namespace {

// Saved activations: copies of whatever backward needs.
class Saved : public SavedActivations {
 public:
  std::vector<float> a, b;
  int64_t bytes() const override { return static_cast<int64_t>((a.size() + b.size()) * sizeof(float)); }
};

absl::Status Alloc(const UnitContext& ctx, int64_t n, Buffer* out) {
  ASSIGN_OR_RETURN(*out, Buffer::AllocateZeroed(ctx.compute.tracker, MemoryCategory::kActivations, Device::kCpu,
                                          DType::kF32, n));
  return absl::OkStatus();
}

// One (rows, C) activation of n*C floats as a pack.
void AddActivation(ActivationPack* pack, Buffer buf, int64_t c) {
  const int64_t rows = buf.numel() / c;
  pack->Add(std::move(buf), {rows, c});
}

ParamSpec Wte(int v, int c) { return {"wte.weight", {v, c}, InitKind::kNormal, 0.02f}; }

class Embed : public NamedUnit {
 public:
  Embed(int v, int t, int c, bool owns_wte) : NamedUnit("embed"), v_(v), c_(c), owns_wte_(owns_wte) {
    if (owns_wte) params_.push_back(Wte(v, c));
    params_.push_back({"wpe.weight", {t, c}, InitKind::kNormal, 0.02f});
  }
  std::vector<std::string> borrowed_params() const override {
    return owns_wte_ ? std::vector<std::string>{} : std::vector<std::string>{"wte.weight"};
  }
  absl::Status Forward(const UnitContext& ctx, absl::Span<const TensorView> p, const Batch& batch,
                       absl::Span<const TensorView>, UnitOutput* unit_out,
                       std::unique_ptr<SavedActivations>* saved) const override {
    ASSIGN_OR_RETURN(const TensorView inputs, batch.Get("inputs"));
    const int64_t B = inputs.shape[0], T = inputs.shape[1];
    const int32_t* tok = inputs.as<int32_t>();
    for (int64_t i = 0; i < B * T; ++i) {
      if (tok[i] < 0 || tok[i] >= v_) {
        return absl::InvalidArgumentError(absl::StrCat("token ", tok[i], " at ", i, " is outside [0, ", v_, ")"));
      }
    }
    Buffer out;
    RETURN_IF_ERROR(Alloc(ctx, B * T * c_, &out));
    // Owned parameters first, then borrowed ones.
    const float* wte = p[owns_wte_ ? 0 : 1].as<float>();
    const float* wpe = p[owns_wte_ ? 1 : 0].as<float>();
    float* x = out.as<float>();
    for (int64_t i = 0; i < B * T; ++i) {
      const int64_t t = i % T;
      for (int c = 0; c < c_; ++c) x[i * c_ + c] = wte[tok[i] * c_ + c] + wpe[t * c_ + c];
    }
    AddActivation(&unit_out->activations, std::move(out), c_);
    *saved = std::make_unique<Saved>();
    return absl::OkStatus();
  }
  absl::Status Backward(const UnitContext&, absl::Span<const TensorView>, absl::Span<const TensorView> g,
                        const Batch& batch, const SavedActivations&, absl::Span<const TensorView> grad_out,
                        ActivationPack*) const override {
    ASSIGN_OR_RETURN(const TensorView inputs, batch.Get("inputs"));
    const int64_t B = inputs.shape[0], T = inputs.shape[1];
    const int32_t* tok = inputs.as<int32_t>();
    float* dwte = g[owns_wte_ ? 0 : 1].as<float>();
    float* dwpe = g[owns_wte_ ? 1 : 0].as<float>();
    const float* dx = grad_out[0].as<float>();
    for (int64_t i = 0; i < B * T; ++i) {
      const int64_t t = i % T;
      for (int c = 0; c < c_; ++c) {
        dwte[tok[i] * c_ + c] += dx[i * c_ + c];
        dwpe[t * c_ + c] += dx[i * c_ + c];
      }
    }
    return absl::OkStatus();
  }

 private:
  int v_, c_;
  bool owns_wte_;
};

class Block : public NamedUnit {
 public:
  Block(int i, int c) : NamedUnit(absl::StrCat("blk.", i)), c_(c) {
    params_ = {{absl::StrCat(name_, ".fc.weight"), {c, c}, InitKind::kNormal, 0.3f},
               {absl::StrCat(name_, ".fc.bias"), {c}, InitKind::kNormal, 0.1f}};
    params_.back().no_weight_decay = true;  // the bias
  }
  absl::Status Forward(const UnitContext& ctx, absl::Span<const TensorView> p, const Batch&,
                       absl::Span<const TensorView> ins, UnitOutput* unit_out,
                       std::unique_ptr<SavedActivations>* saved) const override {
    const TensorView& in = ins[0];
    const int64_t n = in.numel() / c_;
    const float* x = in.as<float>();
    const float* w = p[0].as<float>();
    const float* b = p[1].as<float>();
    Buffer out_buf;
    Buffer* out = &out_buf;
    RETURN_IF_ERROR(Alloc(ctx, n * c_, out));
    auto s = std::make_unique<Saved>();
    s->a.assign(x, x + n * c_);
    s->b.resize(n * c_);
    float* y = out->as<float>();
    for (int64_t i = 0; i < n; ++i) {
      for (int o = 0; o < c_; ++o) {
        float z = b[o];
        for (int k = 0; k < c_; ++k) z += x[i * c_ + k] * w[k * c_ + o];
        const float h = std::tanh(z);
        s->b[i * c_ + o] = h;
        y[i * c_ + o] = x[i * c_ + o] + h;
      }
    }
    AddActivation(&unit_out->activations, std::move(out_buf), c_);
    *saved = std::move(s);
    return absl::OkStatus();
  }
  absl::Status Backward(const UnitContext& ctx, absl::Span<const TensorView> p, absl::Span<const TensorView> g,
                        const Batch&, const SavedActivations& saved, absl::Span<const TensorView> grad_out,
                        ActivationPack* grad_in) const override {
    const Saved& s = static_cast<const Saved&>(saved);
    const int64_t n = static_cast<int64_t>(s.a.size()) / c_;
    const float* w = p[0].as<float>();
    float* dw = g[0].as<float>();
    float* db = g[1].as<float>();
    const float* dy = grad_out[0].as<float>();
    Buffer dx_buf;
    RETURN_IF_ERROR(Alloc(ctx, n * c_, &dx_buf));
    float* dx = dx_buf.as<float>();
    std::vector<float> dz(c_);
    for (int64_t i = 0; i < n; ++i) {
      for (int o = 0; o < c_; ++o) {
        const float h = s.b[i * c_ + o];
        dz[o] = dy[i * c_ + o] * (1.0f - h * h);
        db[o] += dz[o];
      }
      for (int k = 0; k < c_; ++k) {
        float acc = dy[i * c_ + k];
        for (int o = 0; o < c_; ++o) {
          dw[k * c_ + o] += s.a[i * c_ + k] * dz[o];
          acc += dz[o] * w[k * c_ + o];
        }
        dx[i * c_ + k] = acc;
      }
    }
    AddActivation(grad_in, std::move(dx_buf), c_);
    return absl::OkStatus();
  }

 private:
  int c_;
};

class Head : public NamedUnit {
 public:
  Head(int v, int c, int nan_target, bool has_scale, bool owns_wte)
      : NamedUnit("head"), v_(v), c_(c), nan_target_(nan_target), ones_(c, 1.0f), owns_wte_(owns_wte) {
    if (has_scale) params_ = {{"ln_f.weight", {c}, InitKind::kOnes, 0}};
    if (has_scale) params_[0].no_weight_decay = true;  // a norm weight
    if (owns_wte) params_.push_back(Wte(v, c));  // wte is p.back() either way
  }
  std::vector<std::string> borrowed_params() const override {
    return owns_wte_ ? std::vector<std::string>{} : std::vector<std::string>{"wte.weight"};
  }
  double NominalLossWeight(const Batch& batch) const override {
    const TensorView* t = batch.Find("targets");
    return t == nullptr ? 0.0 : static_cast<double>(t->numel());
  }

  // Cross-entropy summed over the targets >= 0 (a negative one is padding).
  absl::Status Forward(const UnitContext&, absl::Span<const TensorView> p, const Batch& batch,
                       absl::Span<const TensorView> ins, UnitOutput* out,
                       std::unique_ptr<SavedActivations>* saved) const override {
    const TensorView& in = ins[0];
    const int64_t n = in.numel() / c_;
    const float* x = in.as<float>();
    const float* scale = params_.size() == (owns_wte_ ? 1u : 0u) ? ones_.data() : p[0].as<float>();
    const float* wte = p.back().as<float>();
    ASSIGN_OR_RETURN(const TensorView targets, batch.Get("targets"));
    const int32_t* target = targets.as<int32_t>();
    int64_t valid = 0;
    auto s = std::make_unique<Saved>();
    s->a.assign(x, x + n * c_);
    s->b.resize(n * v_);  // probabilities
    double loss = 0;
    std::vector<float> xs(c_);
    for (int64_t i = 0; i < n; ++i) {
      for (int c = 0; c < c_; ++c) xs[c] = x[i * c_ + c] * scale[c];
      float* prob = &s->b[i * v_];
      float mx = -INFINITY;
      for (int v = 0; v < v_; ++v) {
        float z = 0;
        for (int c = 0; c < c_; ++c) z += xs[c] * wte[v * c_ + c];
        prob[v] = z;
        mx = std::max(mx, z);
      }
      float sum = 0;
      for (int v = 0; v < v_; ++v) {
        prob[v] = std::exp(prob[v] - mx);
        sum += prob[v];
      }
      for (int v = 0; v < v_; ++v) prob[v] /= sum;
      if (target[i] < 0) continue;
      loss -= std::log(prob[target[i]]);
      ++valid;
    }
    out->loss.loss = WeightedSum{loss, static_cast<double>(valid)};
    *saved = std::move(s);
    return absl::OkStatus();
  }
  absl::Status Backward(const UnitContext& ctx, absl::Span<const TensorView> p, absl::Span<const TensorView> g,
                        const Batch& batch, const SavedActivations& saved, absl::Span<const TensorView> grad_out,
                        ActivationPack* grad_in) const override {
    const Saved& s = static_cast<const Saved&>(saved);
    const int64_t n = static_cast<int64_t>(s.a.size()) / c_;
    const float* scale = params_.size() == (owns_wte_ ? 1u : 0u) ? ones_.data() : p[0].as<float>();
    const float* wte = p.back().as<float>();
    std::vector<float> scratch(c_);  // sink for the scale gradient when there is no scale
    float* dscale = params_.size() == (owns_wte_ ? 1u : 0u) ? scratch.data() : g[0].as<float>();
    float* dwte = g.back().as<float>();
    ASSIGN_OR_RETURN(const TensorView targets, batch.Get("targets"));
    const int32_t* target = targets.as<int32_t>();
    const float dloss = grad_out[0].as<float>()[0];
    Buffer dx_buf;
    RETURN_IF_ERROR(Alloc(ctx, n * c_, &dx_buf));
    float* dx = dx_buf.as<float>();
    std::vector<float> xs(c_), dxs(c_);
    for (int64_t i = 0; i < n; ++i) {
      const float* x = &s.a[i * c_];
      for (int c = 0; c < c_; ++c) {
        xs[c] = x[c] * scale[c];
        dxs[c] = 0;
      }
      if (target[i] < 0) {
        for (int c = 0; c < c_; ++c) dx[i * c_ + c] = 0;
        continue;
      }
      for (int v = 0; v < v_; ++v) {
        const float dz = (s.b[i * v_ + v] - (v == target[i] ? 1.0f : 0.0f)) * dloss;
        for (int c = 0; c < c_; ++c) {
          dwte[v * c_ + c] += dz * xs[c];
          dxs[c] += dz * wte[v * c_ + c];
        }
      }
      for (int c = 0; c < c_; ++c) {
        dscale[c] += dxs[c] * x[c];
        dx[i * c_ + c] = dxs[c] * scale[c];
      }
      if (target[i] == nan_target_) dscale[0] += NAN;
    }
    AddActivation(grad_in, std::move(dx_buf), c_);
    return absl::OkStatus();
  }

 private:
  int v_, c_, nan_target_;
  std::vector<float> ones_;
  bool owns_wte_;
};

}  // namespace

std::unique_ptr<Model> BuildToyModel(const ToyModelConfig& config) {
  auto model = std::make_unique<Model>();
  model->units.push_back(
      std::make_unique<Embed>(config.vocab_size, config.seq_len, config.n_embd, !config.head_owns_wte));
  for (int i = 0; i < config.n_layer; ++i) model->units.push_back(std::make_unique<Block>(i, config.n_embd));
  model->units.push_back(std::make_unique<Head>(config.vocab_size, config.n_embd, config.nan_target, config.head_scale,
                                                config.head_owns_wte));
  return model;
}

}  // namespace zeroshard
