#include "nn/gpt2_units.h"

#include <cmath>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/cast.h"
#include "kernels/residual.h"
#include "nn/device_sync.h"
#include "nn/tensor_checks.h"

namespace zeroshard {
namespace {

// A view of the same memory with another shape.
TensorView Reshaped(const TensorView& t, std::vector<int64_t> shape) {
  TensorView v = t;
  v.shape = std::move(shape);
  return v;
}

absl::Status CheckParamCount(const std::string& unit, absl::Span<const TensorView> views, size_t expected,
                             const char* what) {
  if (views.size() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat(unit, ": got ", views.size(), " ", what, " views, expected ", expected));
  }
  return absl::OkStatus();
}

// (B, T) of the batch's inputs; kInvalidArgument unless "inputs" (and
// "targets" when needed) are (B, T) i32 on the compute device.
absl::StatusOr<std::pair<int64_t, int64_t>> BatchShape(const ComputeContext& ctx, const Batch& batch,
                                                       bool need_targets) {
  ASSIGN_OR_RETURN(const TensorView inputs, batch.Get("inputs"));
  if (inputs.shape.size() != 2) return CheckTensor(inputs, "batch inputs", DType::kI32, {-1, -1}, ctx.kernels.device);
  const int64_t b = inputs.shape[0], t = inputs.shape[1];
  RETURN_IF_ERROR(CheckTensor(inputs, "batch inputs", DType::kI32, {b, t}, ctx.kernels.device));
  if (need_targets) {
    ASSIGN_OR_RETURN(const TensorView targets, batch.Get("targets"));
    RETURN_IF_ERROR(CheckTensor(targets, "batch targets", DType::kI32, {b, t}, ctx.kernels.device));
  }
  return std::make_pair(b, t);
}

// The (B, T, C) activation a block or the head receives: one tensor.
absl::StatusOr<TensorView> OnlyInput(const std::string& unit, absl::Span<const TensorView> in) {
  if (in.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(unit, ": got ", in.size(), " input tensors, expected 1"));
  }
  return in[0];
}

// A copy made on the kernels' stream (Cast to the same dtype is a copy), so it
// is ordered after the kernel that produced `src`.
absl::StatusOr<Buffer> CopyOf(const ComputeContext& ctx, const TensorView& src, MemoryCategory category) {
  ASSIGN_OR_RETURN(Buffer buf, AllocateOnDevice(ctx, category, src.dtype, src.numel()));
  RETURN_IF_ERROR(kernels::Cast(ctx.kernels, buf.data(), src.dtype, src.data, src.dtype, src.numel()));
  return buf;
}

ParamSpec Spec(std::string name, std::vector<int64_t> shape, InitKind init, float std = 0.02f) {
  ParamSpec p;
  p.name = std::move(name);
  p.shape = std::move(shape);
  p.init = init;
  p.init_std = init == InitKind::kNormal ? std : 0.0f;
  return p;
}

class NothingSaved : public SavedActivations {
 public:
  int64_t bytes() const override { return 0; }
};

struct BlockSaved : public SavedActivations {
  Buffer x, ln1, ln1_mean, ln1_rstd, qkv, att, atty, res2, ln2, ln2_mean, ln2_rstd, fch, fch_gelu;
  int64_t bytes() const override {
    return x.bytes() + ln1.bytes() + ln1_mean.bytes() + ln1_rstd.bytes() + qkv.bytes() + att.bytes() +
           atty.bytes() + res2.bytes() + ln2.bytes() + ln2_mean.bytes() + ln2_rstd.bytes() + fch.bytes() +
           fch_gelu.bytes();
  }
};

struct HeadSaved : public SavedActivations {
  Buffer x, lnf, lnf_mean, lnf_rstd, logits, lse;
  int64_t bytes() const override {
    return x.bytes() + lnf.bytes() + lnf_mean.bytes() + lnf_rstd.bytes() + logits.bytes() + lse.bytes();
  }
};

// What each unit's BackwardInput keeps for its BackwardWeight (kActivations).
struct EmbedWeightInputs : public SavedActivations {
  Buffer dout;  // (B,T,C): the caller's output grad need not outlive BackwardInput
  int64_t bytes() const override { return dout.bytes(); }
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

struct HeadWeightInputs : public SavedActivations {
  Buffer dlogits;  // (N,V): the lm head's output grad
  Buffer dlnf;     // (N,C): ln_f's output grad
  int64_t bytes() const override { return dlogits.bytes() + dlnf.bytes(); }
};

// An absent tensor: the layers skip an output whose data is null.
const TensorView kNone{};

// A layer whose gradient views are all null (frozen parameters) is skipped.
bool AllNull(std::initializer_list<const TensorView*> grads) {
  for (const TensorView* g : grads) {
    if (g->data != nullptr) return false;
  }
  return true;
}

template <typename T>
absl::StatusOr<const T*> WeightInputsAs(const std::string& unit, const SavedActivations& weight_inputs) {
  const auto* w = dynamic_cast<const T*>(&weight_inputs);
  if (w == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(unit, ": weight inputs are not this unit's (pass what its BackwardInput returned)"));
  }
  return w;
}

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
// embed

Gpt2EmbedUnit::Gpt2EmbedUnit(const Gpt2Config& config)
    : NamedUnit("embed"), embedding_(config.vocab_size, config.seq_len, config.n_embd), c_(config.n_embd) {
  // Hugging Face initialises both embeddings with normal(0, 0.02).
  params_.push_back(Spec("wte.weight", {config.vocab_size, config.n_embd}, InitKind::kNormal));
  params_.push_back(Spec("wpe.weight", {config.seq_len, config.n_embd}, InitKind::kNormal));
}

absl::Status Gpt2EmbedUnit::Forward(const UnitContext& uctx, absl::Span<const TensorView> params,
                                    const Batch& batch, absl::Span<const TensorView> /*in*/, UnitOutput* out,
                                    std::unique_ptr<SavedActivations>* saved) const {
  const ComputeContext& ctx = uctx.compute;
  RETURN_IF_ERROR(CheckParamCount(name_, params, 2, "parameter"));
  ASSIGN_OR_RETURN(auto bt, BatchShape(ctx, batch, /*need_targets=*/false));
  ASSIGN_OR_RETURN(Buffer y, AllocateOnDevice(ctx, MemoryCategory::kActivations, ctx.compute_dtype,
                                              bt.first * bt.second * c_));
  RETURN_IF_ERROR(embedding_.Forward(ctx, params[0], params[1], *batch.Find("inputs"),
                                     View(y, {bt.first, bt.second, c_})));
  out->activations.Add(std::move(y), {bt.first, bt.second, c_});
  *saved = std::make_unique<NothingSaved>();
  return absl::OkStatus();
}

absl::Status Gpt2EmbedUnit::Backward(const UnitContext& uctx, absl::Span<const TensorView> params,
                                     absl::Span<const TensorView> grads, const Batch& batch,
                                     const SavedActivations& /*saved*/, absl::Span<const TensorView> grad_out,
                                     ActivationPack* grad_in) const {
  RETURN_IF_ERROR(CheckParamCount(name_, params, 2, "parameter"));
  RETURN_IF_ERROR(CheckParamCount(name_, grads, 2, "gradient"));
  ASSIGN_OR_RETURN(const TensorView dy, OnlyInput(name_ + " output grad", grad_out));
  ASSIGN_OR_RETURN(const TensorView inputs, batch.Get("inputs"));
  grad_in->Clear();
  return embedding_.Backward(uctx.compute, inputs, dy, grads[0], grads[1]);
}

absl::Status Gpt2EmbedUnit::BackwardInput(const UnitContext& uctx, absl::Span<const TensorView> params,
                                          const Batch& batch, const SavedActivations& /*saved*/,
                                          absl::Span<const TensorView> grad_out, ActivationPack* grad_in,
                                          std::unique_ptr<SavedActivations>* weight_inputs) const {
  const ComputeContext& ctx = uctx.compute;
  RETURN_IF_ERROR(CheckParamCount(name_, params, 2, "parameter"));
  ASSIGN_OR_RETURN(const TensorView dy, OnlyInput(name_ + " output grad", grad_out));
  ASSIGN_OR_RETURN(auto bt, BatchShape(ctx, batch, /*need_targets=*/false));
  RETURN_IF_ERROR(
      CheckTensor(dy, "embedding output grad", ctx.compute_dtype, {bt.first, bt.second, c_}, ctx.kernels.device));
  auto w = std::make_unique<EmbedWeightInputs>();
  ASSIGN_OR_RETURN(w->dout, CopyOf(ctx, dy, MemoryCategory::kActivations));
  grad_in->Clear();
  *weight_inputs = std::move(w);
  return absl::OkStatus();
}

absl::Status Gpt2EmbedUnit::BackwardWeight(const UnitContext& uctx, absl::Span<const TensorView> grads,
                                           const Batch& batch, const SavedActivations& /*saved*/,
                                           const SavedActivations& weight_inputs) const {
  RETURN_IF_ERROR(CheckParamCount(name_, grads, 2, "gradient"));
  ASSIGN_OR_RETURN(const EmbedWeightInputs* w, WeightInputsAs<EmbedWeightInputs>(name_, weight_inputs));
  ASSIGN_OR_RETURN(auto bt, BatchShape(uctx.compute, batch, /*need_targets=*/false));
  if (w->dout.numel() != bt.first * bt.second * c_) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": batch has ", bt.first * bt.second,
                                                   " rows but the weight inputs have ", w->dout.numel() / c_));
  }
  if (AllNull({&grads[0], &grads[1]})) return absl::OkStatus();
  return embedding_.Backward(uctx.compute, *batch.Find("inputs"), View(w->dout, {bt.first, bt.second, c_}), grads[0],
                             grads[1]);
}

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
