#include "nn/gpt2_units.h"

#include <cmath>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/cast.h"
#include "kernels/residual.h"
#include "nn/device_sync.h"
#include "nn/gpt2_unit_helpers.h"
#include "nn/tensor_checks.h"

namespace zeroshard {
namespace {

using gpt2_internal::AllNull;
using gpt2_internal::BatchShape;
using gpt2_internal::CheckParamCount;
using gpt2_internal::CopyOf;
using gpt2_internal::OnlyInput;
using gpt2_internal::Reshaped;
using gpt2_internal::Spec;
using gpt2_internal::WeightInputsAs;
using gpt2_internal::kNone;

struct HeadSaved : public SavedActivations {
  Buffer x, lnf, lnf_mean, lnf_rstd, logits, lse;
  int64_t bytes() const override {
    return x.bytes() + lnf.bytes() + lnf_mean.bytes() + lnf_rstd.bytes() + logits.bytes() + lse.bytes();
  }
};

struct HeadWeightInputs : public SavedActivations {
  Buffer dlogits;  // (N,V): the lm head's output grad
  Buffer dlnf;     // (N,C): ln_f's output grad
  int64_t bytes() const override { return dlogits.bytes() + dlnf.bytes(); }
};

// The head's saved activations, once checked against the batch.
absl::StatusOr<const HeadSaved*> CheckHeadSaved(int64_t c, const ComputeContext& ctx, const Batch& batch,
                                                const SavedActivations& saved) {
  const auto* s = dynamic_cast<const HeadSaved*>(&saved);
  if (s == nullptr) return absl::InvalidArgumentError("head: saved activations are not the head's");
  ASSIGN_OR_RETURN(auto bt, BatchShape(ctx, batch, /*need_targets=*/true));
  const int64_t n = bt.first * bt.second;
  if (s->x.numel() != n * c) {
    return absl::InvalidArgumentError(
        absl::StrCat("head: batch has ", n, " rows but the saved forward had ", s->x.numel() / c));
  }
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------
// head

Gpt2HeadUnit::Gpt2HeadUnit(const Gpt2Config& config)
    : NamedUnit("head"),
      c_(config.n_embd),
      v_(config.vocab_size),
      ln_f_("ln_f", c_, kGpt2LayerNormEps),
      lm_head_(v_, c_),
      cross_entropy_(v_) {
  params_ = {Spec("ln_f.weight", {c_}, InitKind::kOnes), Spec("ln_f.bias", {c_}, InitKind::kZeros)};
}

double Gpt2HeadUnit::NominalLossWeight(const Batch& batch) const {
  const TensorView* targets = batch.Find("targets");
  return targets == nullptr ? 0.0 : static_cast<double>(targets->numel());
}

absl::Status Gpt2HeadUnit::Forward(const UnitContext& uctx, absl::Span<const TensorView> params,
                                   const Batch& batch, absl::Span<const TensorView> ins, UnitOutput* out,
                                   std::unique_ptr<SavedActivations>* saved) const {
  const ComputeContext& ctx = uctx.compute;
  RETURN_IF_ERROR(CheckParamCount(name_, params, 3, "parameter (ln_f.weight, ln_f.bias, wte.weight)"));
  ASSIGN_OR_RETURN(const TensorView in, OnlyInput(name_, ins));
  const DType dt = ctx.compute_dtype;
  ASSIGN_OR_RETURN(auto bt, BatchShape(ctx, batch, /*need_targets=*/true));
  const int64_t n = bt.first * bt.second;
  RETURN_IF_ERROR(CheckTensor(in, "head input", dt, {bt.first, bt.second, c_}, ctx.kernels.device));
  const auto act = MemoryCategory::kActivations;
  auto s = std::make_unique<HeadSaved>();
  ASSIGN_OR_RETURN(s->x, CopyOf(ctx, in, act));
  ASSIGN_OR_RETURN(s->lnf, AllocateOnDevice(ctx, act, dt, n * c_));
  ASSIGN_OR_RETURN(s->lnf_mean, AllocateOnDevice(ctx, act, DType::kF32, n));
  ASSIGN_OR_RETURN(s->lnf_rstd, AllocateOnDevice(ctx, act, DType::kF32, n));
  ASSIGN_OR_RETURN(s->logits, AllocateOnDevice(ctx, act, dt, n * v_));
  ASSIGN_OR_RETURN(s->lse, AllocateOnDevice(ctx, act, DType::kF32, n));
  ASSIGN_OR_RETURN(Buffer losses, AllocateOnDevice(ctx, MemoryCategory::kWorkspace, DType::kF32, n));
  ASSIGN_OR_RETURN(Buffer sums, AllocateOnDevice(ctx, MemoryCategory::kWorkspace, DType::kF32, 2));
  RETURN_IF_ERROR(ln_f_.Forward(ctx, params[0], params[1], View(s->x, {n, c_}), View(s->lnf, {n, c_}),
                                View(s->lnf_mean, {n}), View(s->lnf_rstd, {n})));
  RETURN_IF_ERROR(lm_head_.Forward(ctx, params[2], View(s->lnf, {n, c_}), View(s->logits, {n, v_})));
  RETURN_IF_ERROR(cross_entropy_.Forward(ctx, View(s->logits, {n, v_}), Reshaped(*batch.Find("targets"), {n}),
                                         View(losses, {n}), View(s->lse, {n}), View(sums, {2})));
  float host[2] = {0, 0};
  RETURN_IF_ERROR(WaitForDevice(ctx.kernels));  // the sums come from a kernel
  RETURN_IF_ERROR(DeviceCopy(host, Device::kCpu, sums.data(), sums.device(), sizeof(host)));
  out->loss.loss = WeightedSum{host[0], host[1]};
  *saved = std::move(s);
  return absl::OkStatus();
}

absl::Status Gpt2HeadUnit::Backward(const UnitContext& uctx, absl::Span<const TensorView> params,
                                    absl::Span<const TensorView> grads, const Batch& batch,
                                    const SavedActivations& saved_base, absl::Span<const TensorView> grad_outs,
                                    ActivationPack* grad_in) const {
  const ComputeContext& ctx = uctx.compute;
  RETURN_IF_ERROR(CheckParamCount(name_, params, 3, "parameter (ln_f.weight, ln_f.bias, wte.weight)"));
  RETURN_IF_ERROR(CheckParamCount(name_, grads, 3, "gradient"));
  ASSIGN_OR_RETURN(const TensorView grad_out, OnlyInput("head output grad", grad_outs));
  ASSIGN_OR_RETURN(const HeadSaved* s, CheckHeadSaved(c_, ctx, batch, saved_base));
  const DType dt = ctx.compute_dtype;
  ASSIGN_OR_RETURN(auto bt, BatchShape(ctx, batch, /*need_targets=*/true));
  const int64_t n = bt.first * bt.second;
  RETURN_IF_ERROR(CheckTensor(grad_out, "head output grad", DType::kF32, {1}, Device::kCpu));
  const float dloss = grad_out.as<float>()[0];
  const auto ws = MemoryCategory::kWorkspace;
  ASSIGN_OR_RETURN(Buffer dlogits, AllocateOnDevice(ctx, ws, dt, n * v_));
  ASSIGN_OR_RETURN(Buffer dlnf, AllocateOnDevice(ctx, ws, dt, n * c_));
  RETURN_IF_ERROR(cross_entropy_.Backward(ctx, View(s->logits, {n, v_}), View(s->lse, {n}),
                                          Reshaped(*batch.Find("targets"), {n}), dloss, View(dlogits, {n, v_})));
  RETURN_IF_ERROR(lm_head_.Backward(ctx, params[2], View(s->lnf, {n, c_}), View(dlogits, {n, v_}),
                                    View(dlnf, {n, c_}), grads[2]));
  ASSIGN_OR_RETURN(Buffer dx, AllocateOnDevice(ctx, MemoryCategory::kActivations, dt, n * c_));
  RETURN_IF_ERROR(ln_f_.Backward(ctx, params[0], View(s->x, {n, c_}), View(s->lnf_mean, {n}), View(s->lnf_rstd, {n}),
                                 View(dlnf, {n, c_}), View(dx, {n, c_}), grads[0], grads[1]));
  grad_in->Clear();
  grad_in->Add(std::move(dx), {bt.first, bt.second, c_});
  return absl::OkStatus();
}

absl::Status Gpt2HeadUnit::BackwardInput(const UnitContext& uctx, absl::Span<const TensorView> params,
                                         const Batch& batch, const SavedActivations& saved_base,
                                         absl::Span<const TensorView> grad_outs, ActivationPack* grad_in,
                                         std::unique_ptr<SavedActivations>* weight_inputs) const {
  const ComputeContext& ctx = uctx.compute;
  RETURN_IF_ERROR(CheckParamCount(name_, params, 3, "parameter (ln_f.weight, ln_f.bias, wte.weight)"));
  ASSIGN_OR_RETURN(const TensorView grad_out, OnlyInput("head output grad", grad_outs));
  ASSIGN_OR_RETURN(const HeadSaved* s, CheckHeadSaved(c_, ctx, batch, saved_base));
  const DType dt = ctx.compute_dtype;
  ASSIGN_OR_RETURN(auto bt, BatchShape(ctx, batch, /*need_targets=*/true));
  const int64_t n = bt.first * bt.second;
  RETURN_IF_ERROR(CheckTensor(grad_out, "head output grad", DType::kF32, {1}, Device::kCpu));
  const float dloss = grad_out.as<float>()[0];
  const auto act = MemoryCategory::kActivations;
  auto w = std::make_unique<HeadWeightInputs>();
  ASSIGN_OR_RETURN(w->dlogits, AllocateOnDevice(ctx, act, dt, n * v_));
  ASSIGN_OR_RETURN(w->dlnf, AllocateOnDevice(ctx, act, dt, n * c_));
  RETURN_IF_ERROR(cross_entropy_.Backward(ctx, View(s->logits, {n, v_}), View(s->lse, {n}),
                                          Reshaped(*batch.Find("targets"), {n}), dloss, View(w->dlogits, {n, v_})));
  RETURN_IF_ERROR(
      lm_head_.Backward(ctx, params[2], kNone, View(w->dlogits, {n, v_}), View(w->dlnf, {n, c_}), kNone));
  ASSIGN_OR_RETURN(Buffer dx, AllocateOnDevice(ctx, act, dt, n * c_));
  RETURN_IF_ERROR(ln_f_.Backward(ctx, params[0], View(s->x, {n, c_}), View(s->lnf_mean, {n}), View(s->lnf_rstd, {n}),
                                 View(w->dlnf, {n, c_}), View(dx, {n, c_}), kNone, kNone));
  grad_in->Clear();
  grad_in->Add(std::move(dx), {bt.first, bt.second, c_});
  *weight_inputs = std::move(w);
  return absl::OkStatus();
}

absl::Status Gpt2HeadUnit::BackwardWeight(const UnitContext& uctx, absl::Span<const TensorView> grads,
                                          const Batch& batch, const SavedActivations& saved_base,
                                          const SavedActivations& weight_inputs) const {
  const ComputeContext& ctx = uctx.compute;
  RETURN_IF_ERROR(CheckParamCount(name_, grads, 3, "gradient"));
  ASSIGN_OR_RETURN(const HeadSaved* s, CheckHeadSaved(c_, ctx, batch, saved_base));
  ASSIGN_OR_RETURN(const HeadWeightInputs* w, WeightInputsAs<HeadWeightInputs>(name_, weight_inputs));
  const int64_t n = s->x.numel() / c_;
  if (w->dlnf.numel() != s->x.numel()) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": weight inputs have ", w->dlnf.numel() / c_,
                                                   " rows but the saved forward had ", n));
  }
  if (grads[2].data != nullptr) {
    RETURN_IF_ERROR(lm_head_.Backward(ctx, kNone, View(s->lnf, {n, c_}), View(w->dlogits, {n, v_}), kNone, grads[2]));
  }
  if (!AllNull({&grads[0], &grads[1]})) {
    RETURN_IF_ERROR(ln_f_.Backward(ctx, kNone, View(s->x, {n, c_}), View(s->lnf_mean, {n}), View(s->lnf_rstd, {n}),
                                   View(w->dlnf, {n, c_}), kNone, grads[0], grads[1]));
  }
  return absl::OkStatus();
}

}  // namespace zeroshard
