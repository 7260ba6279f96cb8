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
using gpt2_internal::CheckParamCount;
using gpt2_internal::CopyOf;
using gpt2_internal::OnlyInput;
using gpt2_internal::Reshaped;
using gpt2_internal::Spec;
using gpt2_internal::WeightInputsAs;
using gpt2_internal::kNone;

struct BlockSaved : public SavedActivations {
  Buffer x, ln1, ln1_mean, ln1_rstd, qkv, att, atty, res2, ln2, ln2_mean, ln2_rstd, fch, fch_gelu;
  int64_t bytes() const override {
    return x.bytes() + ln1.bytes() + ln1_mean.bytes() + ln1_rstd.bytes() + qkv.bytes() + att.bytes() +
           atty.bytes() + res2.bytes() + ln2.bytes() + ln2_mean.bytes() + ln2_rstd.bytes() + fch.bytes() +
           fch_gelu.bytes();
  }
};

// The output gradient of every layer with parameters.
struct BlockWeightInputs : public SavedActivations {
  Buffer dy;     // mlp.c_proj (N,C): the block's output grad
  Buffer dfch;   // mlp.c_fc (N,4C), after GELU backward
  Buffer dln2;   // ln_2 (N,C)
  Buffer dres2;  // attn.c_proj (N,C): dy + ln_2's input grad
  Buffer dqkv;   // attn.c_attn (N,3C)
  Buffer dln1;   // ln_1 (N,C)
  int64_t bytes() const override {
    return dy.bytes() + dfch.bytes() + dln2.bytes() + dres2.bytes() + dqkv.bytes() + dln1.bytes();
  }
};

// The block's saved activations, once they and grad_out (B,T,C) are checked.
absl::StatusOr<const BlockSaved*> CheckBlockBackward(const std::string& unit, int64_t c, const ComputeContext& ctx,
                                                     const SavedActivations& saved, const TensorView& grad_out) {
  const auto* s = dynamic_cast<const BlockSaved*>(&saved);
  if (s == nullptr) return absl::InvalidArgumentError(absl::StrCat(unit, ": saved activations are not a block's"));
  const int64_t b = grad_out.shape.size() == 3 ? grad_out.shape[0] : -1;
  const int64_t t = grad_out.shape.size() == 3 ? grad_out.shape[1] : -1;
  const int64_t n = b * t;
  RETURN_IF_ERROR(CheckTensor(grad_out, absl::StrCat(unit, " output grad"), ctx.compute_dtype, {b, t, c},
                              ctx.kernels.device));
  if (s->x.numel() != n * c) {
    return absl::InvalidArgumentError(absl::StrCat(unit, ": output grad has ", n, " rows but the saved forward had ",
                                                   s->x.numel() / c));
  }
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------
// h.i

Gpt2BlockUnit::Gpt2BlockUnit(const Gpt2Config& config, int layer)
    : NamedUnit(absl::StrCat("h.", layer)),
      c_(config.n_embd),
      nh_(config.n_head),
      ln_1_(absl::StrCat(name_, ".ln_1"), c_, kGpt2LayerNormEps),
      ln_2_(absl::StrCat(name_, ".ln_2"), c_, kGpt2LayerNormEps),
      c_attn_(absl::StrCat(name_, ".attn.c_attn"), c_, 3 * c_),
      attn_c_proj_(absl::StrCat(name_, ".attn.c_proj"), c_, c_),
      c_fc_(absl::StrCat(name_, ".mlp.c_fc"), c_, 4 * c_),
      mlp_c_proj_(absl::StrCat(name_, ".mlp.c_proj"), 4 * c_, c_),
      attn_(c_, nh_) {
  // GPT-2 scales the residual projections' init by 1/sqrt(2 * n_layer).
  const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(config.n_layer));
  const std::string p = name_ + ".";
  params_ = {
      Spec(p + "ln_1.weight", {c_}, InitKind::kOnes),
      Spec(p + "ln_1.bias", {c_}, InitKind::kZeros),
      Spec(p + "attn.c_attn.weight", {c_, 3 * c_}, InitKind::kNormal),
      Spec(p + "attn.c_attn.bias", {3 * c_}, InitKind::kZeros),
      Spec(p + "attn.c_proj.weight", {c_, c_}, InitKind::kNormal, proj_std),
      Spec(p + "attn.c_proj.bias", {c_}, InitKind::kZeros),
      Spec(p + "ln_2.weight", {c_}, InitKind::kOnes),
      Spec(p + "ln_2.bias", {c_}, InitKind::kZeros),
      Spec(p + "mlp.c_fc.weight", {c_, 4 * c_}, InitKind::kNormal),
      Spec(p + "mlp.c_fc.bias", {4 * c_}, InitKind::kZeros),
      Spec(p + "mlp.c_proj.weight", {4 * c_, c_}, InitKind::kNormal, proj_std),
      Spec(p + "mlp.c_proj.bias", {c_}, InitKind::kZeros),
  };
}

namespace {
enum BlockParam { kLn1W, kLn1B, kAttnW, kAttnB, kAttnProjW, kAttnProjB, kLn2W, kLn2B, kFcW, kFcB, kFcProjW, kFcProjB };
}  // namespace

absl::Status Gpt2BlockUnit::Forward(const UnitContext& uctx, absl::Span<const TensorView> params,
                                    const Batch& /*batch*/, absl::Span<const TensorView> ins, UnitOutput* out,
                                    std::unique_ptr<SavedActivations>* saved) const {
  const ComputeContext& ctx = uctx.compute;
  RETURN_IF_ERROR(CheckParamCount(name_, params, 12, "parameter"));
  ASSIGN_OR_RETURN(const TensorView in, OnlyInput(name_, ins));
  const DType dt = ctx.compute_dtype;
  const Device dev = ctx.kernels.device;
  const int64_t b = in.shape.size() == 3 ? in.shape[0] : -1;
  const int64_t t = in.shape.size() == 3 ? in.shape[1] : -1;
  RETURN_IF_ERROR(CheckTensor(in, absl::StrCat(name_, " input"), dt, {b, t, c_}, dev));
  const int64_t n = b * t;
  const auto act = MemoryCategory::kActivations;
  auto s = std::make_unique<BlockSaved>();
  ASSIGN_OR_RETURN(s->x, CopyOf(ctx, in, act));
  ASSIGN_OR_RETURN(s->ln1, AllocateOnDevice(ctx, act, dt, n * c_));
  ASSIGN_OR_RETURN(s->ln1_mean, AllocateOnDevice(ctx, act, DType::kF32, n));
  ASSIGN_OR_RETURN(s->ln1_rstd, AllocateOnDevice(ctx, act, DType::kF32, n));
  ASSIGN_OR_RETURN(s->qkv, AllocateOnDevice(ctx, act, dt, n * 3 * c_));
  ASSIGN_OR_RETURN(s->att, AllocateOnDevice(ctx, act, DType::kF32, b * nh_ * t * t));
  ASSIGN_OR_RETURN(s->atty, AllocateOnDevice(ctx, act, dt, n * c_));
  ASSIGN_OR_RETURN(s->res2, AllocateOnDevice(ctx, act, dt, n * c_));
  ASSIGN_OR_RETURN(s->ln2, AllocateOnDevice(ctx, act, dt, n * c_));
  ASSIGN_OR_RETURN(s->ln2_mean, AllocateOnDevice(ctx, act, DType::kF32, n));
  ASSIGN_OR_RETURN(s->ln2_rstd, AllocateOnDevice(ctx, act, DType::kF32, n));
  ASSIGN_OR_RETURN(s->fch, AllocateOnDevice(ctx, act, dt, n * 4 * c_));
  ASSIGN_OR_RETURN(s->fch_gelu, AllocateOnDevice(ctx, act, dt, n * 4 * c_));
  ASSIGN_OR_RETURN(Buffer y_buf, AllocateOnDevice(ctx, act, dt, n * c_));

  const TensorView x = View(s->x, {n, c_});
  const TensorView res2 = View(s->res2, {n, c_});
  const TensorView y = View(y_buf, {n, c_});
  // Attention branch: res2 = x + c_proj(attn(c_attn(ln_1(x)))).
  RETURN_IF_ERROR(ln_1_.Forward(ctx, params[kLn1W], params[kLn1B], x, View(s->ln1, {n, c_}),
                                View(s->ln1_mean, {n}), View(s->ln1_rstd, {n})));
  RETURN_IF_ERROR(c_attn_.Forward(ctx, params[kAttnW], params[kAttnB], View(s->ln1, {n, c_}),
                                  View(s->qkv, {n, 3 * c_})));
  RETURN_IF_ERROR(attn_.Forward(ctx, View(s->qkv, {b, t, 3 * c_}), View(s->atty, {b, t, c_}),
                                View(s->att, {b, nh_, t, t})));
  RETURN_IF_ERROR(attn_c_proj_.Forward(ctx, params[kAttnProjW], params[kAttnProjB], View(s->atty, {n, c_}), res2));
  RETURN_IF_ERROR(kernels::ResidualForward(ctx.kernels, res2.data, res2.data, x.data, n * c_, dt));
  // MLP branch: out = res2 + c_proj(gelu(c_fc(ln_2(res2)))).
  RETURN_IF_ERROR(ln_2_.Forward(ctx, params[kLn2W], params[kLn2B], res2, View(s->ln2, {n, c_}),
                                View(s->ln2_mean, {n}), View(s->ln2_rstd, {n})));
  RETURN_IF_ERROR(c_fc_.Forward(ctx, params[kFcW], params[kFcB], View(s->ln2, {n, c_}), View(s->fch, {n, 4 * c_})));
  RETURN_IF_ERROR(gelu_.Forward(ctx, View(s->fch, {n, 4 * c_}), View(s->fch_gelu, {n, 4 * c_})));
  RETURN_IF_ERROR(mlp_c_proj_.Forward(ctx, params[kFcProjW], params[kFcProjB], View(s->fch_gelu, {n, 4 * c_}), y));
  RETURN_IF_ERROR(kernels::ResidualForward(ctx.kernels, y.data, y.data, res2.data, n * c_, dt));
  out->activations.Add(std::move(y_buf), {b, t, c_});
  *saved = std::move(s);
  return absl::OkStatus();
}

absl::Status Gpt2BlockUnit::Backward(const UnitContext& uctx, absl::Span<const TensorView> params,
                                     absl::Span<const TensorView> grads, const Batch& /*batch*/,
                                     const SavedActivations& saved_base, absl::Span<const TensorView> grad_outs,
                                     ActivationPack* grad_in) const {
  const ComputeContext& ctx = uctx.compute;
  RETURN_IF_ERROR(CheckParamCount(name_, params, 12, "parameter"));
  ASSIGN_OR_RETURN(const TensorView grad_out, OnlyInput(name_ + " output grad", grad_outs));
  RETURN_IF_ERROR(CheckParamCount(name_, grads, 12, "gradient"));
  ASSIGN_OR_RETURN(const BlockSaved* s, CheckBlockBackward(name_, c_, ctx, saved_base, grad_out));
  const DType dt = ctx.compute_dtype;
  const int64_t b = grad_out.shape[0], t = grad_out.shape[1], n = b * t;
  const auto ws = MemoryCategory::kWorkspace;
  const TensorView dy = Reshaped(grad_out, {n, c_});
  // dres2 = dout + (ln_2 branch's input grad).
  ASSIGN_OR_RETURN(Buffer dres2, CopyOf(ctx, dy, ws));
  ASSIGN_OR_RETURN(Buffer dfch, AllocateOnDevice(ctx, ws, dt, n * 4 * c_));
  ASSIGN_OR_RETURN(Buffer dnc, AllocateOnDevice(ctx, ws, dt, n * c_));     // an (N,C) input grad
  ASSIGN_OR_RETURN(Buffer dtmp, AllocateOnDevice(ctx, ws, dt, n * c_));    // LayerNorm input grads
  ASSIGN_OR_RETURN(Buffer dqkv, AllocateOnDevice(ctx, ws, dt, n * 3 * c_));
  const TensorView fch = View(s->fch, {n, 4 * c_});
  RETURN_IF_ERROR(mlp_c_proj_.Backward(ctx, params[kFcProjW], View(s->fch_gelu, {n, 4 * c_}), dy,
                                       View(dfch, {n, 4 * c_}), grads[kFcProjW], grads[kFcProjB]));
  RETURN_IF_ERROR(gelu_.Backward(ctx, fch, View(dfch, {n, 4 * c_}), View(dfch, {n, 4 * c_})));
  RETURN_IF_ERROR(c_fc_.Backward(ctx, params[kFcW], View(s->ln2, {n, c_}), View(dfch, {n, 4 * c_}),
                                 View(dnc, {n, c_}), grads[kFcW], grads[kFcB]));
  RETURN_IF_ERROR(ln_2_.Backward(ctx, params[kLn2W], View(s->res2, {n, c_}), View(s->ln2_mean, {n}),
                                 View(s->ln2_rstd, {n}), View(dnc, {n, c_}), View(dtmp, {n, c_}), grads[kLn2W],
                                 grads[kLn2B]));
  RETURN_IF_ERROR(kernels::AddInPlace(ctx.kernels, dres2.data(), dtmp.data(), n * c_, dt));
  RETURN_IF_ERROR(attn_c_proj_.Backward(ctx, params[kAttnProjW], View(s->atty, {n, c_}), View(dres2, {n, c_}),
                                        View(dnc, {n, c_}), grads[kAttnProjW], grads[kAttnProjB]));
  RETURN_IF_ERROR(attn_.Backward(ctx, View(s->qkv, {b, t, 3 * c_}), View(s->att, {b, nh_, t, t}),
                                 View(dnc, {b, t, c_}), View(dqkv, {b, t, 3 * c_})));
  RETURN_IF_ERROR(c_attn_.Backward(ctx, params[kAttnW], View(s->ln1, {n, c_}), View(dqkv, {n, 3 * c_}),
                                   View(dnc, {n, c_}), grads[kAttnW], grads[kAttnB]));
  ASSIGN_OR_RETURN(Buffer dx, AllocateOnDevice(ctx, MemoryCategory::kActivations, dt, n * c_));
  RETURN_IF_ERROR(ln_1_.Backward(ctx, params[kLn1W], View(s->x, {n, c_}), View(s->ln1_mean, {n}),
                                 View(s->ln1_rstd, {n}), View(dnc, {n, c_}), View(dx, {n, c_}), grads[kLn1W],
                                 grads[kLn1B]));
  RETURN_IF_ERROR(kernels::AddInPlace(ctx.kernels, dx.data(), dres2.data(), n * c_, dt));
  grad_in->Clear();
  grad_in->Add(std::move(dx), {b, t, c_});
  return absl::OkStatus();
}

// The same kernels on the same values as Backward, with the weight-gradient
// parts skipped; each layer's output gradient lands in *weight_inputs.
absl::Status Gpt2BlockUnit::BackwardInput(const UnitContext& uctx, absl::Span<const TensorView> params,
                                          const Batch& /*batch*/, const SavedActivations& saved_base,
                                          absl::Span<const TensorView> grad_outs, ActivationPack* grad_in,
                                          std::unique_ptr<SavedActivations>* weight_inputs) const {
  const ComputeContext& ctx = uctx.compute;
  RETURN_IF_ERROR(CheckParamCount(name_, params, 12, "parameter"));
  ASSIGN_OR_RETURN(const TensorView grad_out, OnlyInput(name_ + " output grad", grad_outs));
  ASSIGN_OR_RETURN(const BlockSaved* s, CheckBlockBackward(name_, c_, ctx, saved_base, grad_out));
  const DType dt = ctx.compute_dtype;
  const int64_t b = grad_out.shape[0], t = grad_out.shape[1], n = b * t;
  const auto act = MemoryCategory::kActivations;
  const TensorView dy_in = Reshaped(grad_out, {n, c_});
  auto w = std::make_unique<BlockWeightInputs>();
  ASSIGN_OR_RETURN(w->dy, CopyOf(ctx, dy_in, act));
  ASSIGN_OR_RETURN(w->dfch, AllocateOnDevice(ctx, act, dt, n * 4 * c_));
  ASSIGN_OR_RETURN(w->dln2, AllocateOnDevice(ctx, act, dt, n * c_));
  ASSIGN_OR_RETURN(w->dres2, CopyOf(ctx, dy_in, act));  // += ln_2's input grad below
  ASSIGN_OR_RETURN(w->dqkv, AllocateOnDevice(ctx, act, dt, n * 3 * c_));
  ASSIGN_OR_RETURN(w->dln1, AllocateOnDevice(ctx, act, dt, n * c_));
  const auto ws = MemoryCategory::kWorkspace;
  ASSIGN_OR_RETURN(Buffer datty, AllocateOnDevice(ctx, ws, dt, n * c_));  // attention output grad
  ASSIGN_OR_RETURN(Buffer dtmp, AllocateOnDevice(ctx, ws, dt, n * c_));   // ln_2 input grad
  const TensorView dy = View(w->dy, {n, c_});
  const TensorView dfch = View(w->dfch, {n, 4 * c_});
  const TensorView dln2 = View(w->dln2, {n, c_});
  const TensorView dres2 = View(w->dres2, {n, c_});
  const TensorView dln1 = View(w->dln1, {n, c_});
  RETURN_IF_ERROR(mlp_c_proj_.Backward(ctx, params[kFcProjW], kNone, dy, dfch, kNone, kNone));
  RETURN_IF_ERROR(gelu_.Backward(ctx, View(s->fch, {n, 4 * c_}), dfch, dfch));
  RETURN_IF_ERROR(c_fc_.Backward(ctx, params[kFcW], kNone, dfch, dln2, kNone, kNone));
  RETURN_IF_ERROR(ln_2_.Backward(ctx, params[kLn2W], View(s->res2, {n, c_}), View(s->ln2_mean, {n}),
                                 View(s->ln2_rstd, {n}), dln2, View(dtmp, {n, c_}), kNone, kNone));
  RETURN_IF_ERROR(kernels::AddInPlace(ctx.kernels, dres2.data, dtmp.data(), n * c_, dt));
  RETURN_IF_ERROR(attn_c_proj_.Backward(ctx, params[kAttnProjW], kNone, dres2, View(datty, {n, c_}), kNone, kNone));
  RETURN_IF_ERROR(attn_.Backward(ctx, View(s->qkv, {b, t, 3 * c_}), View(s->att, {b, nh_, t, t}),
                                 View(datty, {b, t, c_}), View(w->dqkv, {b, t, 3 * c_})));
  RETURN_IF_ERROR(c_attn_.Backward(ctx, params[kAttnW], kNone, View(w->dqkv, {n, 3 * c_}), dln1, kNone, kNone));
  ASSIGN_OR_RETURN(Buffer dx, AllocateOnDevice(ctx, act, dt, n * c_));
  RETURN_IF_ERROR(ln_1_.Backward(ctx, params[kLn1W], View(s->x, {n, c_}), View(s->ln1_mean, {n}),
                                 View(s->ln1_rstd, {n}), dln1, View(dx, {n, c_}), kNone, kNone));
  RETURN_IF_ERROR(kernels::AddInPlace(ctx.kernels, dx.data(), dres2.data, n * c_, dt));
  grad_in->Clear();
  grad_in->Add(std::move(dx), {b, t, c_});
  *weight_inputs = std::move(w);
  return absl::OkStatus();
}

absl::Status Gpt2BlockUnit::BackwardWeight(const UnitContext& uctx, absl::Span<const TensorView> grads,
                                           const Batch& /*batch*/, const SavedActivations& saved_base,
                                           const SavedActivations& weight_inputs) const {
  const ComputeContext& ctx = uctx.compute;
  RETURN_IF_ERROR(CheckParamCount(name_, grads, 12, "gradient"));
  const auto* s = dynamic_cast<const BlockSaved*>(&saved_base);
  if (s == nullptr) return absl::InvalidArgumentError(absl::StrCat(name_, ": saved activations are not a block's"));
  ASSIGN_OR_RETURN(const BlockWeightInputs* w, WeightInputsAs<BlockWeightInputs>(name_, weight_inputs));
  const int64_t n = s->x.numel() / c_;
  if (w->dy.numel() != s->x.numel()) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": weight inputs have ", w->dy.numel() / c_,
                                                   " rows but the saved forward had ", n));
  }
  // Each parameter's gradient gets exactly one += (Backward's), in any order.
  if (!AllNull({&grads[kFcProjW], &grads[kFcProjB]})) {
    RETURN_IF_ERROR(mlp_c_proj_.Backward(ctx, kNone, View(s->fch_gelu, {n, 4 * c_}), View(w->dy, {n, c_}), kNone,
                                         grads[kFcProjW], grads[kFcProjB]));
  }
  if (!AllNull({&grads[kFcW], &grads[kFcB]})) {
    RETURN_IF_ERROR(c_fc_.Backward(ctx, kNone, View(s->ln2, {n, c_}), View(w->dfch, {n, 4 * c_}), kNone, grads[kFcW],
                                   grads[kFcB]));
  }
  if (!AllNull({&grads[kLn2W], &grads[kLn2B]})) {
    RETURN_IF_ERROR(ln_2_.Backward(ctx, kNone, View(s->res2, {n, c_}), View(s->ln2_mean, {n}), View(s->ln2_rstd, {n}),
                                   View(w->dln2, {n, c_}), kNone, grads[kLn2W], grads[kLn2B]));
  }
  if (!AllNull({&grads[kAttnProjW], &grads[kAttnProjB]})) {
    RETURN_IF_ERROR(attn_c_proj_.Backward(ctx, kNone, View(s->atty, {n, c_}), View(w->dres2, {n, c_}), kNone,
                                          grads[kAttnProjW], grads[kAttnProjB]));
  }
  if (!AllNull({&grads[kAttnW], &grads[kAttnB]})) {
    RETURN_IF_ERROR(c_attn_.Backward(ctx, kNone, View(s->ln1, {n, c_}), View(w->dqkv, {n, 3 * c_}), kNone,
                                     grads[kAttnW], grads[kAttnB]));
  }
  if (!AllNull({&grads[kLn1W], &grads[kLn1B]})) {
    RETURN_IF_ERROR(ln_1_.Backward(ctx, kNone, View(s->x, {n, c_}), View(s->ln1_mean, {n}), View(s->ln1_rstd, {n}),
                                   View(w->dln1, {n, c_}), kNone, grads[kLn1W], grads[kLn1B]));
  }
  return absl::OkStatus();
}

}  // namespace zeroshard
