#include "models/gpt2/gpt2_units.h"

#include <cmath>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/cast.h"
#include "kernels/residual.h"
#include "nn/device_sync.h"
#include "models/gpt2/gpt2_unit_helpers.h"
#include "nn/tensor_checks.h"

namespace zeroshard {
namespace {

// The cross-entropy kernel's (loss sum, weight): read on the CPU; on a GPU
// left on the device for the engine's one read-back of the step.
absl::Status SetLoss(const ComputeContext& ctx, Buffer sums, LossTerms* out) {
  if (ctx.kernels.device != Device::kCpu) {
    out->device_sums = std::make_shared<const Buffer>(std::move(sums));
    return absl::OkStatus();
  }
  float host[2] = {0, 0};
  RETURN_IF_ERROR(WaitForDevice(ctx.kernels));  // the sums come from a kernel
  RETURN_IF_ERROR(DeviceCopy(host, Device::kCpu, sums.data(), sums.device(), sizeof(host)));
  out->loss = WeightedSum{host[0], host[1]};
  return absl::OkStatus();
}

using gpt2_internal::AllNull;
using gpt2_internal::BatchShape;
using gpt2_internal::CheckParamCount;
using gpt2_internal::CopyOf;
using gpt2_internal::OnlyInput;
using gpt2_internal::Reshaped;
using gpt2_internal::NoDecay;
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
  Buffer dlogits;  // (N,V): the lm head's output grad; vocabulary-parallel (N, Vp/tp)
  Buffer dlnf;     // (N,C): ln_f's output grad; this rank's rows {N/tp, C} under sequence parallelism
  int64_t bytes() const override { return dlogits.bytes() + dlnf.bytes(); }
};

// What the vocabulary-parallel head computes on: N rows, this rank's `rows`
// of them (N/tp under sequence parallelism, else N), its vocabulary range.
struct VpShapes {
  int64_t b = 0, t = 0, n = 0, rows = 0;
  bool sp = false;
  kernels::VocabRange range;
};

absl::StatusOr<VpShapes> VpShapesOf(const std::string& unit, int64_t v, int64_t vp, const UnitContext& uctx,
                                    const Batch& batch) {
  VpShapes sh;
  ASSIGN_OR_RETURN(auto bt, BatchShape(uctx.compute, batch, /*need_targets=*/true));
  sh.b = bt.first;
  sh.t = bt.second;
  sh.n = sh.b * sh.t;
  sh.sp = vocab_parallel::SequenceParallel(uctx.parallel);
  sh.rows = sh.n;
  if (sh.sp) {
    ASSIGN_OR_RETURN(sh.rows, vocab_parallel::LocalRows(unit, sh.n, uctx.parallel));
  }
  ASSIGN_OR_RETURN(sh.range, vocab_parallel::RangeOf(unit, v, vp, uctx.parallel));
  return sh;
}

// The shape of the head's input (and its gradient): (B,T,C), or {N/tp, C}.
std::vector<int64_t> InputShape(const VpShapes& sh, int64_t c) {
  if (sh.sp) return {sh.rows, c};
  return {sh.b, sh.t, c};
}

// The saved activations of a vocabulary-parallel forward, checked.
absl::StatusOr<const HeadSaved*> CheckVpSaved(int64_t c, const VpShapes& sh, const SavedActivations& saved) {
  const auto* s = dynamic_cast<const HeadSaved*>(&saved);
  if (s == nullptr) return absl::InvalidArgumentError("head: saved activations are not the head's");
  if (s->x.numel() != sh.rows * c || s->logits.numel() != sh.n * sh.range.local) {
    return absl::InvalidArgumentError(absl::StrCat("head: the batch gives ", sh.rows, " rows of ", sh.n, " and ",
                                                   sh.range.local, " vocabulary columns but the saved forward had ",
                                                   s->x.numel() / c, " rows and ", s->logits.numel(), " logits"));
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
// head

Gpt2HeadUnit::Gpt2HeadUnit(const Gpt2Config& config)
    : NamedUnit("head"),
      c_(config.n_embd),
      v_(config.vocab_size),
      vp_(config.padded_vocab_size()),
      ln_f_("ln_f", c_, kGpt2LayerNormEps),
      lm_head_(v_, c_),
      cross_entropy_(v_),
      vp_cross_entropy_(name_, v_, vp_) {
  params_ = {NoDecay(Spec("ln_f.weight", {c_}, InitKind::kOnes)), NoDecay(Spec("ln_f.bias", {c_}, InitKind::kZeros))};
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
  if (VocabParallel(uctx.parallel)) return ForwardVocabParallel(uctx, params, batch, in, out, saved);
  const DType dt = ctx.compute_dtype;
  ASSIGN_OR_RETURN(auto bt, BatchShape(ctx, batch, /*need_targets=*/true));
  const int64_t n = bt.first * bt.second;
  RETURN_IF_ERROR(CheckTensor(in, "head input", dt, {bt.first, bt.second, c_}, ctx.kernels.device));
  const auto act = MemoryCategory::kActivations;
  auto s = std::make_unique<HeadSaved>();
  ASSIGN_OR_RETURN(s->x, CopyOf(ctx, in, act));
  ASSIGN_OR_RETURN(s->lnf, AllocateOutputOnDevice(ctx, act, dt, n * c_));
  ASSIGN_OR_RETURN(s->lnf_mean, AllocateOutputOnDevice(ctx, act, DType::kF32, n));
  ASSIGN_OR_RETURN(s->lnf_rstd, AllocateOutputOnDevice(ctx, act, DType::kF32, n));
  // The lm head's GEMM writes every logit.
  ASSIGN_OR_RETURN(s->logits, AllocateOutputOnDevice(ctx, act, dt, n * v_));
  ASSIGN_OR_RETURN(s->lse, AllocateOutputOnDevice(ctx, act, DType::kF32, n));
  ASSIGN_OR_RETURN(Buffer losses, AllocateOnDevice(ctx, MemoryCategory::kWorkspace, DType::kF32, n));
  ASSIGN_OR_RETURN(Buffer sums, AllocateOnDevice(ctx, MemoryCategory::kWorkspace, DType::kF32, 2));
  RETURN_IF_ERROR(ln_f_.Forward(ctx, params[0], params[1], View(s->x, {n, c_}), View(s->lnf, {n, c_}),
                                View(s->lnf_mean, {n}), View(s->lnf_rstd, {n})));
  RETURN_IF_ERROR(lm_head_.Forward(ctx, params[2], View(s->lnf, {n, c_}), View(s->logits, {n, v_})));
  RETURN_IF_ERROR(cross_entropy_.Forward(ctx, View(s->logits, {n, v_}), Reshaped(*batch.Find("targets"), {n}),
                                         View(losses, {n}), View(s->lse, {n}), View(sums, {2})));
  RETURN_IF_ERROR(SetLoss(ctx, std::move(sums), &out->loss));
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
  if (VocabParallel(uctx.parallel)) {
    ASSIGN_OR_RETURN(const VpShapes sh, VpShapesOf(name_, v_, vp_, uctx, batch));
    Buffer dlogits, dlnf;
    RETURN_IF_ERROR(InputGradsVocabParallel(uctx, params[2], batch, saved_base, grad_outs, MemoryCategory::kWorkspace,
                                            &dlogits, &dlnf));
    ASSIGN_OR_RETURN(const HeadSaved* s, CheckVpSaved(c_, sh, saved_base));
    if (grads[2].data != nullptr) {
      const TiedLmHead lm_head(sh.range.local, c_);
      RETURN_IF_ERROR(lm_head.Backward(ctx, kNone, View(s->lnf, {sh.n, c_}), View(dlogits, {sh.n, sh.range.local}),
                                       kNone, grads[2]));
    }
    ASSIGN_OR_RETURN(Buffer dx, AllocateOnDevice(ctx, MemoryCategory::kActivations, ctx.compute_dtype, sh.rows * c_));
    RETURN_IF_ERROR(LnfBackwardVocabParallel(uctx, params[0], saved_base, dlnf, View(dx, {sh.rows, c_}), grads[0],
                                             grads[1]));
    grad_in->Clear();
    grad_in->Add(std::move(dx), InputShape(sh, c_));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const TensorView grad_out, OnlyInput("head output grad", grad_outs));
  ASSIGN_OR_RETURN(const HeadSaved* s, CheckHeadSaved(c_, ctx, batch, saved_base));
  const DType dt = ctx.compute_dtype;
  ASSIGN_OR_RETURN(auto bt, BatchShape(ctx, batch, /*need_targets=*/true));
  const int64_t n = bt.first * bt.second;
  RETURN_IF_ERROR(CheckTensor(grad_out, "head output grad", DType::kF32, {1}, Device::kCpu));
  const float dloss = grad_out.as<float>()[0];
  const auto ws = MemoryCategory::kWorkspace;
  // Written whole by the cross-entropy gradient and the lm head's dx GEMM.
  ASSIGN_OR_RETURN(Buffer dlogits, AllocateOutputOnDevice(ctx, ws, dt, n * v_));
  ASSIGN_OR_RETURN(Buffer dlnf, AllocateOutputOnDevice(ctx, ws, dt, n * c_));
  RETURN_IF_ERROR(cross_entropy_.Backward(ctx, View(s->logits, {n, v_}), View(s->lse, {n}),
                                          Reshaped(*batch.Find("targets"), {n}), dloss, View(dlogits, {n, v_})));
  RETURN_IF_ERROR(lm_head_.Backward(ctx, params[2], View(s->lnf, {n, c_}), View(dlogits, {n, v_}),
                                    View(dlnf, {n, c_}), grads[2]));
  ASSIGN_OR_RETURN(Buffer dx, AllocateOutputOnDevice(ctx, MemoryCategory::kActivations, dt, n * c_));
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
  if (VocabParallel(uctx.parallel)) {
    ASSIGN_OR_RETURN(const VpShapes sh, VpShapesOf(name_, v_, vp_, uctx, batch));
    auto w = std::make_unique<HeadWeightInputs>();
    RETURN_IF_ERROR(InputGradsVocabParallel(uctx, params[2], batch, saved_base, grad_outs,
                                            MemoryCategory::kActivations, &w->dlogits, &w->dlnf));
    ASSIGN_OR_RETURN(Buffer dx, AllocateOnDevice(ctx, MemoryCategory::kActivations, ctx.compute_dtype, sh.rows * c_));
    RETURN_IF_ERROR(
        LnfBackwardVocabParallel(uctx, params[0], saved_base, w->dlnf, View(dx, {sh.rows, c_}), kNone, kNone));
    grad_in->Clear();
    grad_in->Add(std::move(dx), InputShape(sh, c_));
    *weight_inputs = std::move(w);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const TensorView grad_out, OnlyInput("head output grad", grad_outs));
  ASSIGN_OR_RETURN(const HeadSaved* s, CheckHeadSaved(c_, ctx, batch, saved_base));
  const DType dt = ctx.compute_dtype;
  ASSIGN_OR_RETURN(auto bt, BatchShape(ctx, batch, /*need_targets=*/true));
  const int64_t n = bt.first * bt.second;
  RETURN_IF_ERROR(CheckTensor(grad_out, "head output grad", DType::kF32, {1}, Device::kCpu));
  const float dloss = grad_out.as<float>()[0];
  const auto act = MemoryCategory::kActivations;
  auto w = std::make_unique<HeadWeightInputs>();
  ASSIGN_OR_RETURN(w->dlogits, AllocateOutputOnDevice(ctx, act, dt, n * v_));
  ASSIGN_OR_RETURN(w->dlnf, AllocateOutputOnDevice(ctx, act, dt, n * c_));
  RETURN_IF_ERROR(cross_entropy_.Backward(ctx, View(s->logits, {n, v_}), View(s->lse, {n}),
                                          Reshaped(*batch.Find("targets"), {n}), dloss, View(w->dlogits, {n, v_})));
  RETURN_IF_ERROR(
      lm_head_.Backward(ctx, params[2], kNone, View(w->dlogits, {n, v_}), View(w->dlnf, {n, c_}), kNone));
  ASSIGN_OR_RETURN(Buffer dx, AllocateOutputOnDevice(ctx, act, dt, n * c_));
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
  if (VocabParallel(uctx.parallel)) {
    ASSIGN_OR_RETURN(const VpShapes sh, VpShapesOf(name_, v_, vp_, uctx, batch));
    ASSIGN_OR_RETURN(const HeadSaved* s, CheckVpSaved(c_, sh, saved_base));
    ASSIGN_OR_RETURN(const HeadWeightInputs* w, WeightInputsAs<HeadWeightInputs>(name_, weight_inputs));
    if (w->dlnf.numel() != sh.rows * c_ || w->dlogits.numel() != sh.n * sh.range.local) {
      return absl::InvalidArgumentError(absl::StrCat(name_, ": weight inputs have ", w->dlnf.numel() / c_,
                                                     " rows but the saved forward had ", sh.rows));
    }
    if (grads[2].data != nullptr) {
      const TiedLmHead lm_head(sh.range.local, c_);
      RETURN_IF_ERROR(lm_head.Backward(ctx, kNone, View(s->lnf, {sh.n, c_}),
                                       View(w->dlogits, {sh.n, sh.range.local}), kNone, grads[2]));
    }
    if (!AllNull({&grads[0], &grads[1]})) {
      RETURN_IF_ERROR(LnfBackwardVocabParallel(uctx, kNone, saved_base, w->dlnf, kNone, grads[0], grads[1]));
    }
    return absl::OkStatus();
  }
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

// ---------------------------------------------------------------------------
// head, vocabulary-parallel (docs/model.md, "Tensor parallelism")

absl::Status Gpt2HeadUnit::ForwardVocabParallel(const UnitContext& uctx, absl::Span<const TensorView> params,
                                                 const Batch& batch, const TensorView& in, UnitOutput* out,
                                                 std::unique_ptr<SavedActivations>* saved) const {
  const ComputeContext& ctx = uctx.compute;
  const DType dt = ctx.compute_dtype;
  ASSIGN_OR_RETURN(const VpShapes sh, VpShapesOf(name_, v_, vp_, uctx, batch));
  const int64_t n = sh.n, rows = sh.rows, local = sh.range.local;
  RETURN_IF_ERROR(CheckTensor(in, sh.sp ? "head input (this tp rank's rows)" : "head input", dt, InputShape(sh, c_),
                              ctx.kernels.device));
  const auto act = MemoryCategory::kActivations, ws = MemoryCategory::kWorkspace;
  auto s = std::make_unique<HeadSaved>();
  ASSIGN_OR_RETURN(s->x, CopyOf(ctx, in, act));
  ASSIGN_OR_RETURN(s->lnf, AllocateOnDevice(ctx, act, dt, n * c_));  // every row: the lm head's input
  ASSIGN_OR_RETURN(s->lnf_mean, AllocateOnDevice(ctx, act, DType::kF32, rows));
  ASSIGN_OR_RETURN(s->lnf_rstd, AllocateOnDevice(ctx, act, DType::kF32, rows));
  ASSIGN_OR_RETURN(s->logits, AllocateOnDevice(ctx, act, dt, n * local));
  ASSIGN_OR_RETURN(s->lse, AllocateOnDevice(ctx, act, DType::kF32, n));
  ASSIGN_OR_RETURN(Buffer losses, AllocateOnDevice(ctx, ws, DType::kF32, n));
  ASSIGN_OR_RETURN(Buffer sums, AllocateOnDevice(ctx, ws, DType::kF32, 2));
  if (sh.sp) {
    // ln_f on this rank's rows, then every rank gets every row.
    ASSIGN_OR_RETURN(Buffer lnf_rows, AllocateOnDevice(ctx, ws, dt, rows * c_));
    RETURN_IF_ERROR(ln_f_.Forward(ctx, params[0], params[1], View(s->x, {rows, c_}), View(lnf_rows, {rows, c_}),
                                  View(s->lnf_mean, {rows}), View(s->lnf_rstd, {rows})));
    RETURN_IF_ERROR(
        vocab_parallel::AllGather(uctx, name_, "ln_f's output", lnf_rows.data(), s->lnf.data(), rows * c_, dt));
  } else {
    RETURN_IF_ERROR(ln_f_.Forward(ctx, params[0], params[1], View(s->x, {n, c_}), View(s->lnf, {n, c_}),
                                  View(s->lnf_mean, {n}), View(s->lnf_rstd, {n})));
  }
  const TiedLmHead lm_head(local, c_);
  RETURN_IF_ERROR(lm_head.Forward(ctx, params[2], View(s->lnf, {n, c_}), View(s->logits, {n, local})));
  RETURN_IF_ERROR(vp_cross_entropy_.Forward(uctx, View(s->logits, {n, local}), Reshaped(*batch.Find("targets"), {n}),
                                            View(losses, {n}), View(s->lse, {n}), View(sums, {2})));
  RETURN_IF_ERROR(SetLoss(ctx, std::move(sums), &out->loss));
  *saved = std::move(s);
  return absl::OkStatus();
}

absl::Status Gpt2HeadUnit::InputGradsVocabParallel(const UnitContext& uctx, const TensorView& wte_local,
                                                    const Batch& batch, const SavedActivations& saved_base,
                                                    absl::Span<const TensorView> grad_outs, MemoryCategory category,
                                                    Buffer* dlogits, Buffer* dlnf) const {
  const ComputeContext& ctx = uctx.compute;
  const DType dt = ctx.compute_dtype;
  ASSIGN_OR_RETURN(const VpShapes sh, VpShapesOf(name_, v_, vp_, uctx, batch));
  ASSIGN_OR_RETURN(const HeadSaved* s, CheckVpSaved(c_, sh, saved_base));
  ASSIGN_OR_RETURN(const TensorView grad_out, OnlyInput("head output grad", grad_outs));
  RETURN_IF_ERROR(CheckTensor(grad_out, "head output grad", DType::kF32, {1}, Device::kCpu));
  const float dloss = grad_out.as<float>()[0];
  const int64_t n = sh.n, rows = sh.rows, local = sh.range.local;
  ASSIGN_OR_RETURN(*dlogits, AllocateOnDevice(ctx, category, dt, n * local));
  RETURN_IF_ERROR(vp_cross_entropy_.Backward(uctx, View(s->logits, {n, local}), View(s->lse, {n}),
                                             Reshaped(*batch.Find("targets"), {n}), dloss,
                                             View(*dlogits, {n, local})));
  // This rank's columns' share of d(ln_f out) for every row, summed over tp.
  const TiedLmHead lm_head(local, c_);
  if (!sh.sp) {
    ASSIGN_OR_RETURN(*dlnf, AllocateOnDevice(ctx, category, dt, n * c_));
    RETURN_IF_ERROR(lm_head.Backward(ctx, wte_local, kNone, View(*dlogits, {n, local}), View(*dlnf, {n, c_}), kNone));
    return vocab_parallel::AllReduce(uctx, name_, "ln_f's output grad", dlnf->data(), n * c_, dt, ReduceOp::kSum);
  }
  ASSIGN_OR_RETURN(Buffer partial, AllocateOnDevice(ctx, MemoryCategory::kWorkspace, dt, n * c_));
  RETURN_IF_ERROR(lm_head.Backward(ctx, wte_local, kNone, View(*dlogits, {n, local}), View(partial, {n, c_}), kNone));
  ASSIGN_OR_RETURN(*dlnf, AllocateOnDevice(ctx, category, dt, rows * c_));
  return vocab_parallel::ReduceScatter(uctx, name_, "ln_f's output grad", partial.data(), dlnf->data(), rows * c_,
                                       dt);
}

absl::Status Gpt2HeadUnit::LnfBackwardVocabParallel(const UnitContext& uctx, const TensorView& weight,
                                                     const SavedActivations& saved_base, const Buffer& dlnf,
                                                     const TensorView& dx, const TensorView& dweight,
                                                     const TensorView& dbias) const {
  const ComputeContext& ctx = uctx.compute;
  const auto* s = dynamic_cast<const HeadSaved*>(&saved_base);
  if (s == nullptr) return absl::InvalidArgumentError("head: saved activations are not the head's");
  const int64_t rows = s->x.numel() / c_;
  const TensorView x = View(s->x, {rows, c_}), mean = View(s->lnf_mean, {rows}), rstd = View(s->lnf_rstd, {rows});
  const TensorView dy = View(dlnf, {rows, c_});
  if (!vocab_parallel::SequenceParallel(uctx.parallel) || AllNull({&dweight, &dbias})) {
    return ln_f_.Backward(ctx, weight, x, mean, rstd, dy, dx, dweight, dbias);
  }
  // Each rank has its rows' share of ln_f's gradients: sum this call's over
  // tp before accumulating, so they are complete and equal on every rank.
  const DType dt = ctx.compute_dtype;
  ASSIGN_OR_RETURN(Buffer part, AllocateOnDevice(ctx, MemoryCategory::kWorkspace, dt, 2 * c_));
  TensorView dw_part = View(part, {2 * c_}), db_part = dw_part;
  dw_part.shape = {c_};
  db_part.shape = {c_};
  db_part.data = static_cast<char*>(part.data()) + c_ * DTypeSize(dt);
  RETURN_IF_ERROR(ln_f_.Backward(ctx, weight, x, mean, rstd, dy, dx, dw_part, db_part));
  RETURN_IF_ERROR(
      vocab_parallel::AllReduce(uctx, name_, "ln_f's parameter grads", part.data(), 2 * c_, dt, ReduceOp::kSum));
  if (dweight.data != nullptr) {
    RETURN_IF_ERROR(CheckTensor(dweight, "ln_f.weight grad", dt, {c_}, ctx.kernels.device));
    RETURN_IF_ERROR(kernels::AddInPlace(ctx.kernels, dweight.data, dw_part.data, c_, dt));
  }
  if (dbias.data != nullptr) {
    RETURN_IF_ERROR(CheckTensor(dbias, "ln_f.bias grad", dt, {c_}, ctx.kernels.device));
    RETURN_IF_ERROR(kernels::AddInPlace(ctx.kernels, dbias.data, db_part.data, c_, dt));
  }
  return absl::OkStatus();
}

// HeadSaved at tp 1: x and lnf (n, C), logits (n, padded V) in the compute
// dtype; lnf mean and rstd and lse (n) in f32. The last unit outputs no
// activations.
int64_t Gpt2HeadUnit::EstimateSavedActivationBytes(int64_t batch, int64_t seq, DType compute) const {
  const int64_t n = batch * seq;
  return n * (2 * c_ + vp_) * static_cast<int64_t>(DTypeSize(compute)) + n * 3 * 4;
}
int64_t Gpt2HeadUnit::EstimateOutputActivationBytes(int64_t, int64_t, DType) const { return 0; }

}  // namespace zeroshard
