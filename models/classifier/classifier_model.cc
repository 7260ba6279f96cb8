#include "models/classifier/classifier_model.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zeroshard {
namespace {

using Activation = ClassifierModelConfig::Activation;  // TANH or RELU

// What Backward needs, copied out of Forward (so the engine may free
// Forward's input and output): counted as kActivations through bytes().
class Saved : public SavedActivations {
 public:
  std::vector<float> x;  // the unit's input
  std::vector<float> y;  // its output (hidden: after the activation; head: the class probabilities)
  int64_t bytes() const override { return static_cast<int64_t>((x.size() + y.size()) * sizeof(float)); }
};

absl::Status CheckCompute(const UnitContext& ctx, const std::string& unit) {
  if (ctx.compute.compute_dtype != DType::kF32 || ctx.compute.kernels.device != Device::kCpu) {
    return absl::InvalidArgumentError(
        absl::StrCat("unit '", unit, "' computes in f32 on the cpu; got ", DTypeName(ctx.compute.compute_dtype), " on ",
                     DeviceName(ctx.compute.kernels.device), " (set engine.precision.compute_dtype: F32)"));
  }
  return absl::OkStatus();
}

// A rows x `width` f32 tensor on the host, or kInvalidArgument naming it.
absl::StatusOr<int64_t> RowsOf(const TensorView& t, const std::string& what, int64_t width) {
  if (t.dtype != DType::kF32 || t.device != Device::kCpu || t.shape.size() != 2 || t.shape[1] != width) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is ", t.DebugString(), " on ", DeviceName(t.device),
                                                   "; expected f32[rows, ", width, "] on the cpu"));
  }
  return t.shape[0];
}

absl::StatusOr<Buffer> AllocActivation(const UnitContext& ctx, int64_t numel) {
  return Buffer::AllocateZeroed(ctx.compute.tracker, MemoryCategory::kActivations, Device::kCpu, DType::kF32, numel);
}

// y (n, out) = x (n, in) · w (in, out) + b (out); b may be null.
void LinearForward(const float* x, const float* w, const float* b, int64_t n, int64_t in, int64_t out, float* y) {
  for (int64_t r = 0; r < n; ++r) {
    float* yr = y + r * out;
    for (int64_t o = 0; o < out; ++o) yr[o] = b == nullptr ? 0.0f : b[o];
    for (int64_t k = 0; k < in; ++k) {
      const float xk = x[r * in + k];
      const float* wk = w + k * out;
      for (int64_t o = 0; o < out; ++o) yr[o] += xk * wk[o];
    }
  }
}

// dw += xᵀ·dz and db += Σ rows of dz (each skipped when null: frozen);
// dx = dz·wᵀ when dx is not null.
void LinearBackward(const float* x, const float* w, const float* dz, int64_t n, int64_t in, int64_t out, float* dw,
                    float* db, float* dx) {
  for (int64_t r = 0; r < n; ++r) {
    const float* dzr = dz + r * out;
    if (db != nullptr) {
      for (int64_t o = 0; o < out; ++o) db[o] += dzr[o];
    }
    for (int64_t k = 0; k < in; ++k) {
      const float* wk = w + k * out;
      if (dw != nullptr) {
        const float xk = x[r * in + k];
        float* dwk = dw + k * out;
        for (int64_t o = 0; o < out; ++o) dwk[o] += xk * dzr[o];
      }
      if (dx != nullptr) {
        float acc = 0;
        for (int64_t o = 0; o < out; ++o) acc += dzr[o] * wk[o];
        dx[r * in + k] = acc;
      }
    }
  }
}

void AddRows(ActivationPack* pack, Buffer buffer, int64_t width) {
  const int64_t rows = buffer.numel() / width;
  pack->Add(std::move(buffer), {rows, width});
}

// "input": a random linear feature map of the batch's features.
class InputProjection : public NamedUnit {
 public:
  InputProjection(int64_t d, int64_t p, bool trainable) : NamedUnit("input"), d_(d), p_(p) {
    ParamSpec w{"input.weight", {d, p}, InitKind::kNormal, static_cast<float>(1.0 / std::sqrt(double(d)))};
    w.trainable = trainable;
    params_ = {std::move(w)};
  }

  absl::Status Forward(const UnitContext& ctx, absl::Span<const TensorView> p, const Batch& batch,
                       absl::Span<const TensorView>, UnitOutput* out,
                       std::unique_ptr<SavedActivations>* saved) const override {
    RETURN_IF_ERROR(CheckCompute(ctx, name_));
    ASSIGN_OR_RETURN(const TensorView f, batch.Get(kFeatures));
    ASSIGN_OR_RETURN(const int64_t n, RowsOf(f, absl::StrCat("batch tensor '", kFeatures, "'"), d_));
    ASSIGN_OR_RETURN(Buffer y, AllocActivation(ctx, n * p_));
    LinearForward(f.as<float>(), p[0].as<float>(), nullptr, n, d_, p_, y.as<float>());
    AddRows(&out->activations, std::move(y), p_);
    // Backward reads the features from the batch: nothing to keep.
    *saved = std::make_unique<Saved>();
    return absl::OkStatus();
  }

  absl::Status Backward(const UnitContext& ctx, absl::Span<const TensorView> p, absl::Span<const TensorView> g,
                        const Batch& batch, const SavedActivations&, absl::Span<const TensorView> grad_out,
                        ActivationPack*) const override {
    RETURN_IF_ERROR(CheckCompute(ctx, name_));
    if (g[0].data == nullptr) return absl::OkStatus();  // frozen
    ASSIGN_OR_RETURN(const TensorView f, batch.Get(kFeatures));
    const int64_t n = f.shape[0];
    LinearBackward(f.as<float>(), p[0].as<float>(), grad_out[0].as<float>(), n, d_, p_, g[0].as<float>(), nullptr,
                   nullptr);
    return absl::OkStatus();  // the first unit: no input gradient
  }

 private:
  int64_t d_, p_;
};

// "hidden.i": x = act(x·W + b).
class Hidden : public NamedUnit {
 public:
  Hidden(int i, int64_t in, int64_t out, Activation act)
      : NamedUnit(absl::StrCat("hidden.", i)), in_(in), out_(out), act_(act) {
    params_ = {
        {absl::StrCat(name_, ".weight"), {in, out}, InitKind::kNormal, static_cast<float>(1.0 / std::sqrt(double(in)))},
        {absl::StrCat(name_, ".bias"), {out}, InitKind::kZeros, 0.0f}};
    params_.back().no_weight_decay = true;  // biases get no weight decay
  }

  absl::Status Forward(const UnitContext& ctx, absl::Span<const TensorView> p, const Batch&,
                       absl::Span<const TensorView> in, UnitOutput* out,
                       std::unique_ptr<SavedActivations>* saved) const override {
    RETURN_IF_ERROR(CheckCompute(ctx, name_));
    ASSIGN_OR_RETURN(const int64_t n, RowsOf(in[0], absl::StrCat("unit '", name_, "' input"), in_));
    ASSIGN_OR_RETURN(Buffer y_buf, AllocActivation(ctx, n * out_));
    float* y = y_buf.as<float>();
    LinearForward(in[0].as<float>(), p[0].as<float>(), p[1].as<float>(), n, in_, out_, y);
    for (int64_t i = 0; i < n * out_; ++i) {
      y[i] = act_ == ClassifierModelConfig::RELU ? std::max(y[i], 0.0f) : std::tanh(y[i]);
    }
    if (ctx.training) {
      auto s = std::make_unique<Saved>();
      s->x.assign(in[0].as<float>(), in[0].as<float>() + n * in_);
      s->y.assign(y, y + n * out_);
      *saved = std::move(s);
    }
    AddRows(&out->activations, std::move(y_buf), out_);
    return absl::OkStatus();
  }

  absl::Status Backward(const UnitContext& ctx, absl::Span<const TensorView> p, absl::Span<const TensorView> g,
                        const Batch&, const SavedActivations& saved, absl::Span<const TensorView> grad_out,
                        ActivationPack* grad_in) const override {
    RETURN_IF_ERROR(CheckCompute(ctx, name_));
    const Saved& s = static_cast<const Saved&>(saved);
    const int64_t n = static_cast<int64_t>(s.y.size()) / out_;
    const float* dy = grad_out[0].as<float>();
    std::vector<float> dz(n * out_);
    for (int64_t i = 0; i < n * out_; ++i) {
      const float y = s.y[i];
      dz[i] = dy[i] * (act_ == ClassifierModelConfig::RELU ? (y > 0.0f ? 1.0f : 0.0f) : 1.0f - y * y);
    }
    Buffer dx;
    // Nothing before this unit trains (a frozen input layer): no dx.
    if (ctx.input_grad) {
      ASSIGN_OR_RETURN(dx, AllocActivation(ctx, n * in_));
    }
    LinearBackward(s.x.data(), p[0].as<float>(), dz.data(), n, in_, out_, g[0].as<float>(), g[1].as<float>(),
                   ctx.input_grad ? dx.as<float>() : nullptr);
    if (ctx.input_grad) AddRows(grad_in, std::move(dx), in_);
    return absl::OkStatus();
  }

 private:
  int64_t in_, out_;
  Activation act_;
};

// "head": softmax cross-entropy over the labeled rows, and their accuracy.
class Head : public NamedUnit {
 public:
  Head(int64_t in, int64_t classes) : NamedUnit("head"), in_(in), c_(classes) {
    // Small logits at the start: the initial loss is about ln(classes).
    params_ = {{"head.weight", {in, classes}, InitKind::kNormal, static_cast<float>(0.1 / std::sqrt(double(in)))},
               {"head.bias", {classes}, InitKind::kZeros, 0.0f}};
    params_.back().no_weight_decay = true;
  }

  std::vector<std::string> metric_names() const override { return {"accuracy"}; }

  absl::Status Forward(const UnitContext& ctx, absl::Span<const TensorView> p, const Batch& batch,
                       absl::Span<const TensorView> in, UnitOutput* out,
                       std::unique_ptr<SavedActivations>* saved) const override {
    RETURN_IF_ERROR(CheckCompute(ctx, name_));
    ASSIGN_OR_RETURN(const int64_t n, RowsOf(in[0], "unit 'head' input", in_));
    ASSIGN_OR_RETURN(const int32_t* labels, Labels(batch, n));
    auto s = std::make_unique<Saved>();
    s->y.resize(n * c_);
    float* prob = s->y.data();
    LinearForward(in[0].as<float>(), p[0].as<float>(), p[1].as<float>(), n, in_, c_, prob);
    double loss = 0, labeled = 0, correct = 0;
    for (int64_t r = 0; r < n; ++r) {
      float* z = prob + r * c_;
      int64_t best = 0;
      for (int64_t c = 1; c < c_; ++c) best = z[c] > z[best] ? c : best;
      const float mx = z[best];
      const int32_t label = labels[r];
      const float z_label = label >= 0 ? z[label] : 0.0f;
      float sum = 0;
      for (int64_t c = 0; c < c_; ++c) {
        z[c] = std::exp(z[c] - mx);
        sum += z[c];
      }
      for (int64_t c = 0; c < c_; ++c) z[c] /= sum;
      if (label < 0) continue;
      loss += static_cast<double>(std::log(sum) + mx - z_label);  // -log softmax(z)[label]
      labeled += 1;
      correct += best == label ? 1 : 0;
    }
    out->loss.loss = WeightedSum{loss, labeled};
    out->loss.metrics = {WeightedSum{correct, labeled}};
    if (ctx.training) {
      s->x.assign(in[0].as<float>(), in[0].as<float>() + n * in_);
      *saved = std::move(s);
    }
    return absl::OkStatus();
  }

  absl::Status Backward(const UnitContext& ctx, absl::Span<const TensorView> p, absl::Span<const TensorView> g,
                        const Batch& batch, const SavedActivations& saved, absl::Span<const TensorView> grad_out,
                        ActivationPack* grad_in) const override {
    RETURN_IF_ERROR(CheckCompute(ctx, name_));
    const Saved& s = static_cast<const Saved&>(saved);
    const int64_t n = static_cast<int64_t>(s.y.size()) / c_;
    ASSIGN_OR_RETURN(const int32_t* labels, Labels(batch, n));
    const float dsum = grad_out[0].as<float>()[0];  // d(objective)/d(loss sum)
    // d(-log softmax(z)[label])/dz = softmax(z) - onehot(label); unlabeled rows contribute nothing.
    std::vector<float> dz(n * c_, 0.0f);
    for (int64_t r = 0; r < n; ++r) {
      if (labels[r] < 0) continue;
      for (int64_t c = 0; c < c_; ++c) dz[r * c_ + c] = (s.y[r * c_ + c] - (c == labels[r] ? 1.0f : 0.0f)) * dsum;
    }
    Buffer dx;
    if (ctx.input_grad) {
      ASSIGN_OR_RETURN(dx, AllocActivation(ctx, n * in_));
    }
    LinearBackward(s.x.data(), p[0].as<float>(), dz.data(), n, in_, c_, g[0].as<float>(), g[1].as<float>(),
                   ctx.input_grad ? dx.as<float>() : nullptr);
    if (ctx.input_grad) AddRows(grad_in, std::move(dx), in_);
    return absl::OkStatus();
  }

 private:
  // The batch's labels for n rows: i32 [n], each -1 (unlabeled) or a class.
  absl::StatusOr<const int32_t*> Labels(const Batch& batch, int64_t n) const {
    ASSIGN_OR_RETURN(const TensorView t, batch.Get(kLabels));
    if (t.dtype != DType::kI32 || t.device != Device::kCpu || t.shape.size() != 1 || t.shape[0] != n) {
      return absl::InvalidArgumentError(absl::StrCat("batch tensor '", kLabels, "' is ", t.DebugString(), " on ",
                                                     DeviceName(t.device), "; expected i32[", n, "] on the cpu"));
    }
    const int32_t* labels = t.as<int32_t>();
    for (int64_t r = 0; r < n; ++r) {
      if (labels[r] < -1 || labels[r] >= c_) {
        return absl::InvalidArgumentError(absl::StrCat("batch tensor '", kLabels, "' row ", r, " is ", labels[r],
                                                       "; expected -1 (unlabeled) or a class in [0, ", c_, ")"));
      }
    }
    return labels;
  }

  int64_t in_, c_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> BuildClassifier(const ClassifierModelConfig& config) {
  const auto positive = [](const std::string& field, int64_t v, int64_t lo) -> absl::Status {
    if (v >= lo) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("model.", field, ": ", v, " is out of range; expected >= ", lo));
  };
  RETURN_IF_ERROR(positive("input_dim", config.input_dim(), 1));
  RETURN_IF_ERROR(positive("projection_dim", config.projection_dim(), 1));
  RETURN_IF_ERROR(positive("num_classes", config.num_classes(), 2));
  for (int i = 0; i < config.hidden_size(); ++i) {
    RETURN_IF_ERROR(positive(absl::StrCat("hidden[", i, "]"), config.hidden(i), 1));
  }
  auto model = std::make_unique<Model>();
  model->units.push_back(
      std::make_unique<InputProjection>(config.input_dim(), config.projection_dim(), !config.freeze_input_layer()));
  int64_t width = config.projection_dim();
  for (int i = 0; i < config.hidden_size(); ++i) {
    model->units.push_back(std::make_unique<Hidden>(i, width, config.hidden(i), config.activation()));
    width = config.hidden(i);
  }
  model->units.push_back(std::make_unique<Head>(width, config.num_classes()));
  RETURN_IF_ERROR(model->Validate());
  return model;
}

}  // namespace zeroshard
