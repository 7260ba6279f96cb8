#include "nn/resident_model.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "nn/device_sync.h"
#include "nn/param_init.h"

namespace zeroshard {

absl::StatusOr<ResidentModel> ResidentModel::Create(const Model* model, const ComputeContext& ctx) {
  const DType dt = ctx.compute_dtype;
  if (dt != DType::kF32 && dt != DType::kBF16 && dt != DType::kF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("ResidentModel compute dtype ", DTypeName(dt), " is not f32, bf16 or f16"));
  }
  RETURN_IF_ERROR(model->Validate());
  ResidentModel rm;
  rm.model_ = model;
  rm.ctx_ = ctx;
  for (const auto& unit : model->units) {
    std::vector<int64_t> offsets;
    int64_t numel = 0;
    for (const ParamSpec& p : unit->params()) {
      offsets.push_back(numel);
      numel += p.numel();
    }
    rm.offsets_.push_back(std::move(offsets));
    ASSIGN_OR_RETURN(Buffer p,
                     Buffer::AllocateZeroed(ctx.tracker, MemoryCategory::kParams, ctx.kernels.device, dt, numel));
    ASSIGN_OR_RETURN(Buffer g,
                     Buffer::AllocateZeroed(ctx.tracker, MemoryCategory::kGrads, ctx.kernels.device, dt, numel));
    rm.params_.push_back(std::move(p));
    rm.grads_.push_back(std::move(g));
    std::vector<ParamLocation> borrowed;
    for (const std::string& name : unit->borrowed_params()) {
      ASSIGN_OR_RETURN(ParamLocation loc, model->FindParam(name));
      borrowed.push_back(loc);
    }
    rm.borrowed_.push_back(std::move(borrowed));
  }
  return rm;
}

absl::Status ResidentModel::InitParams(uint64_t seed) {
  std::vector<float> host;
  for (int u = 0; u < num_units(); ++u) {
    const size_t base = host.size();
    host.resize(base + static_cast<size_t>(params_[u].numel()));
    const auto& specs = model_->units[u]->params();
    for (size_t i = 0; i < specs.size(); ++i) InitParam(specs[i], seed, host.data() + base + offsets_[u][i]);
  }
  return SetParamsFromHost(host);
}

absl::Status ResidentModel::SetParamsFromHost(const std::vector<float>& values) {
  int64_t total = 0;
  for (const Buffer& p : params_) total += p.numel();
  if (static_cast<int64_t>(values.size()) != total) {
    return absl::InvalidArgumentError(
        absl::StrCat("SetParamsFromHost got ", values.size(), " values, the model has ", total));
  }
  size_t offset = 0;
  for (Buffer& p : params_) {
    const size_t n = static_cast<size_t>(p.numel());
    if (p.dtype() == DType::kF32) {
      RETURN_IF_ERROR(DeviceCopy(p.data(), p.device(), values.data() + offset, Device::kCpu, n * sizeof(float)));
    } else {
      std::vector<uint16_t> half(n);
      ConvertF32ToHalf(values.data() + offset, half.data(), n, p.dtype());
      RETURN_IF_ERROR(DeviceCopy(p.data(), p.device(), half.data(), Device::kCpu, n * sizeof(uint16_t)));
    }
    offset += n;
  }
  return WaitForDevice(ctx_.kernels);
}

absl::StatusOr<std::vector<float>> ResidentModel::CopyToHost(std::vector<Buffer>& buffers) {
  RETURN_IF_ERROR(WaitForDevice(ctx_.kernels));
  std::vector<float> out;
  for (Buffer& b : buffers) {
    const size_t base = out.size(), n = static_cast<size_t>(b.numel());
    out.resize(base + n);
    if (b.dtype() == DType::kF32) {
      RETURN_IF_ERROR(DeviceCopy(out.data() + base, Device::kCpu, b.data(), b.device(), n * sizeof(float)));
    } else {
      std::vector<uint16_t> half(n);
      RETURN_IF_ERROR(DeviceCopy(half.data(), Device::kCpu, b.data(), b.device(), n * sizeof(uint16_t)));
      ConvertHalfToF32(half.data(), out.data() + base, n, b.dtype());
    }
  }
  return out;
}

absl::StatusOr<std::vector<float>> ResidentModel::CopyParamsToHost() { return CopyToHost(params_); }
absl::StatusOr<std::vector<float>> ResidentModel::CopyGradsToHost() { return CopyToHost(grads_); }

absl::Status ResidentModel::ZeroGrads() {
  for (Buffer& g : grads_) RETURN_IF_ERROR(DeviceMemset(g.data(), g.device(), 0, static_cast<size_t>(g.bytes())));
  return WaitForDevice(ctx_.kernels);  // the memsets ran on another stream than the kernels
}

TensorView ResidentModel::param(ParamLocation loc) {
  const DType dt = ctx_.compute_dtype;
  TensorView v;
  v.data = params_[loc.unit].as<char>() + offsets_[loc.unit][loc.param] * static_cast<int64_t>(DTypeSize(dt));
  v.dtype = dt;
  v.shape = model_->units[loc.unit]->params()[loc.param].shape;
  v.device = ctx_.kernels.device;
  return v;
}

TensorView ResidentModel::grad(ParamLocation loc) {
  TensorView v = param(loc);
  v.data = grads_[loc.unit].as<char>() + offsets_[loc.unit][loc.param] * static_cast<int64_t>(DTypeSize(v.dtype));
  return v;
}

std::vector<TensorView> ResidentModel::UnitViews(int u, bool grads) {
  std::vector<TensorView> views;
  const int n = static_cast<int>(model_->units[u]->params().size());
  for (int i = 0; i < n; ++i) views.push_back(grads ? grad({u, i}) : param({u, i}));
  for (ParamLocation loc : borrowed_[u]) views.push_back(grads ? grad(loc) : param(loc));
  if (grads) {
    // A frozen parameter's gradient view is null (nn/unit.h), as the engine gives it.
    for (int i = 0; i < n; ++i) {
      if (!model_->units[u]->params()[i].trainable) views[i].data = nullptr;
    }
    for (size_t b = 0; b < borrowed_[u].size(); ++b) {
      const ParamLocation loc = borrowed_[u][b];
      if (!model_->units[loc.unit]->params()[loc.param].trainable) views[n + b].data = nullptr;
    }
  }
  return views;
}

absl::StatusOr<LossTerms> ResidentModel::Run(const Batch& batch, bool backward, float dsum) {
  const int n = num_units();
  UnitContext uctx;
  uctx.compute = ctx_;
  uctx.training = backward;
  std::vector<std::unique_ptr<SavedActivations>> saved(static_cast<size_t>(n));
  ActivationPack act;  // the current unit's input
  LossTerms loss;
  for (int u = 0; u < n; ++u) {
    UnitOutput out;
    const std::vector<TensorView> params = UnitViews(u, false);
    const std::vector<TensorView> in = act.views();
    uctx.rng_key = UnitRngKey(0, 0, 0, u);
    RETURN_IF_ERROR(model_->units[u]->Forward(uctx, params, batch, in, &out, &saved[u]));
    act = std::move(out.activations);  // saved activations are self-contained: the input can go
    if (u == n - 1) loss = out.loss;
    if (!backward) saved[u].reset();
  }
  if (!backward) return loss;

  float seed = dsum;
  ActivationPack grad;
  for (int u = n - 1; u >= 0; --u) {
    ActivationPack grad_in;
    const std::vector<TensorView> params = UnitViews(u, false);
    const std::vector<TensorView> grads = UnitViews(u, true);
    std::vector<TensorView> grad_out = grad.views();
    if (u == n - 1) {
      TensorView s;
      s.data = &seed;
      s.dtype = DType::kF32;
      s.shape = {1};
      grad_out = {s};
    }
    uctx.rng_key = UnitRngKey(0, 0, 0, u);
    RETURN_IF_ERROR(model_->units[u]->Backward(uctx, params, grads, batch, *saved[u], grad_out, &grad_in));
    saved[u].reset();
    grad = std::move(grad_in);
  }
  return loss;
}

absl::StatusOr<LossTerms> ResidentModel::Forward(const Batch& batch) { return Run(batch, false, 0.0f); }

absl::StatusOr<LossTerms> ResidentModel::ForwardBackward(const Batch& batch, float dsum) {
  return Run(batch, true, dsum);
}

}  // namespace zeroshard
