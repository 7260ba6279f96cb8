#include <cmath>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/bias.h"
#include "kernels/cast.h"
#include "kernels/residual.h"
#include "nn/device_sync.h"
#include "models/gpt2/gpt2_unit_helpers.h"
#include "models/gpt2/gpt2_units.h"
#include "nn/tensor_checks.h"
#include "nn/tensor_parallel.h"

namespace zeroshard {
namespace {

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

// The block's shapes on one tp rank (docs/model.md, "Tensor parallelism").
// Rows: n = B·T in the tensor-parallel region (c_attn to attn.c_proj, c_fc
// to mlp.c_proj), nl in the LayerNorm/residual region: n/tp with sequence
// parallelism, n otherwise. Widths: the local slices of the split layers.
struct BlockLayout {
  int tp = 1;
  int rank = 0;
  bool sp = false;  // sequence parallelism (only at tp > 1)
  int64_t b = 0, t = 0, n = 0, nl = 0;
  int64_t c = 0;
  int64_t nh = 0;  // local heads: n_head / tp
  int64_t cq = 0;  // local q|k|v width: 3C / tp
  int64_t ca = 0;  // local attention width: C / tp
  int64_t cf = 0;  // local MLP width: 4C / tp
  bool split() const { return tp > 1; }
};

// (tp, sequence parallelism) of a context; sequence parallelism means
// nothing at tp 1.
BlockLayout GroupOf(const ParallelContext& par) {
  BlockLayout l;
  l.tp = par.tp_size;
  l.rank = par.tp_rank;
  l.sp = par.sequence_parallel && par.tp_size > 1;
  return l;
}

// Fills the shapes of `l` (its group already set) for a (B, T) batch.
void SetShapes(BlockLayout& l, int64_t b, int64_t t, int64_t c, int64_t nh) {
  l.b = b;
  l.t = t;
  l.n = b * t;
  l.nl = l.sp ? l.n / l.tp : l.n;
  l.c = c;
  l.nh = nh / l.tp;
  l.cq = 3 * c / l.tp;
  l.ca = c / l.tp;
  l.cf = 4 * c / l.tp;
}

std::string GroupName(const BlockLayout& l) {
  return absl::StrCat("tp ", l.tp, l.sp ? " with sequence parallelism" : "");
}

struct BlockSaved : public SavedActivations {
  // LayerNorm/residual region, nl rows: x, ln1, ln1_mean, ln1_rstd, res2, ln2, ln2_mean, ln2_rstd.
  // Tensor-parallel region, n rows of local width: qkv, att_lse (local heads), atty, fch, fch_gelu.
  // Selective checkpointing (selective set): ln1, ln2 and fch_gelu are
  // empty and the backward rebuilds them from x, res2 and fch.
  // keep_gathered (sequence parallelism only): ln1 and ln2 hold all n rows,
  // as gathered for c_attn and c_fc.
  Buffer x, ln1, ln1_mean, ln1_rstd, qkv, att_lse, atty, res2, ln2, ln2_mean, ln2_rstd, fch, fch_gelu;
  BlockLayout layout;  // of the forward that saved them
  bool selective = false;
  bool keep_gathered = false;
  int64_t bytes() const override {
    return x.bytes() + ln1.bytes() + ln1_mean.bytes() + ln1_rstd.bytes() + qkv.bytes() + att_lse.bytes() +
           atty.bytes() + res2.bytes() + ln2.bytes() + ln2_mean.bytes() + ln2_rstd.bytes() + fch.bytes() +
           fch_gelu.bytes();
  }
};

// The output gradient of every layer with parameters. With sequence
// parallelism dy and dres2 are kept gathered (n rows: the row-parallel
// weights' gradients need every row), dln2 and dln1 local (nl rows).
struct BlockWeightInputs : public SavedActivations {
  Buffer dy;     // mlp.c_proj (n,C): the block's output grad
  Buffer dfch;   // mlp.c_fc (n,4C/tp), after GELU backward
  Buffer dln2;   // ln_2 (nl,C)
  Buffer dres2;  // attn.c_proj (n,C): dy + ln_2's input grad
  Buffer dqkv;   // attn.c_attn (n,3C/tp)
  Buffer dln1;   // ln_1 (nl,C)
  // Selective checkpointing: the weight gradients' inputs the forward
  // dropped, rebuilt by B (which has the LayerNorm weights) for W.
  Buffer ln1, ln2, fch_gelu;
  int64_t bytes() const override {
    return dy.bytes() + dfch.bytes() + dln2.bytes() + dres2.bytes() + dqkv.bytes() + dln1.bytes() + ln1.bytes() +
           ln2.bytes() + fch_gelu.bytes();
  }
};

// The group a call runs in; kInvalidArgument unless the communicator fits
// and n_head splits over tp.
absl::StatusOr<BlockLayout> CheckGroup(const std::string& unit, int64_t nh, const UnitContext& uctx) {
  RETURN_IF_ERROR(CheckTensorParallel(uctx.parallel, uctx.compute, unit));
  BlockLayout l = GroupOf(uctx.parallel);
  if (nh % l.tp != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(unit, ": n_head ", nh, " does not split over tp ", l.tp, " (whole heads per rank)"));
  }
  return l;
}

// The saved forward's layout, once the backward's group is checked to be the
// same.
absl::StatusOr<const BlockSaved*> SavedOf(const std::string& unit, int64_t nh, const UnitContext& uctx,
                                          const SavedActivations& saved) {
  const auto* s = dynamic_cast<const BlockSaved*>(&saved);
  if (s == nullptr) return absl::InvalidArgumentError(absl::StrCat(unit, ": saved activations are not a block's"));
  ASSIGN_OR_RETURN(const BlockLayout g, CheckGroup(unit, nh, uctx));
  if (g.tp != s->layout.tp || g.rank != s->layout.rank || g.sp != s->layout.sp) {
    return absl::InvalidArgumentError(absl::StrCat(unit, ": backward at ", GroupName(g), " (rank ", g.rank,
                                                   ") but the saved forward ran at ", GroupName(s->layout), " (rank ",
                                                   s->layout.rank, ")"));
  }
  return s;
}

// The block's saved activations, once they and grad_out ((B,T,C), or
// (N/tp, C) with sequence parallelism) are checked.
absl::StatusOr<const BlockSaved*> CheckBlockBackward(const std::string& unit, int64_t c, int64_t nh,
                                                     const UnitContext& uctx, const SavedActivations& saved,
                                                     const TensorView& grad_out) {
  const ComputeContext& ctx = uctx.compute;
  ASSIGN_OR_RETURN(const BlockSaved* s, SavedOf(unit, nh, uctx, saved));
  const BlockLayout& l = s->layout;
  if (l.sp) {
    RETURN_IF_ERROR(CheckTensor(grad_out, absl::StrCat(unit, " output grad"), ctx.compute_dtype, {l.nl, c},
                                ctx.kernels.device));
    return s;
  }
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

// dst (rows, C) = src, on the kernels' stream.
absl::Status CopyInto(const ComputeContext& ctx, const TensorView& dst, const TensorView& src) {
  return kernels::Cast(ctx.kernels, dst.data, dst.dtype, src.data, src.dtype, src.numel());
}

// The LayerNorms' gradients of one call under sequence parallelism: this
// rank's rows' contribution, summed over tp before it joins `grads`, so the
// accumulators (across micro-batches) only ever receive whole gradients.
// One buffer [ln_1.weight | ln_1.bias | ln_2.weight | ln_2.bias] (4C), one
// all-reduce.
class LayerNormGrads {
 public:
  // `grads`: the gradient views of ln_1.weight, ln_1.bias, ln_2.weight,
  // ln_2.bias. What the LayerNorms accumulate into: views of the
  // contribution when sequence parallel, else the gradients themselves.
  static absl::StatusOr<LayerNormGrads> Create(const ComputeContext& ctx, const BlockLayout& l,
                                               std::initializer_list<TensorView> grads) {
    LayerNormGrads g;
    int k = 0;
    for (const TensorView& t : grads) g.targets_[k++] = t;
    for (const TensorView& t : g.targets_) g.any_ = g.any_ || t.data != nullptr;
    if (!l.sp || !g.any_) {
      for (int i = 0; i < 4; ++i) g.views_[i] = g.targets_[i];
      return g;
    }
    ASSIGN_OR_RETURN(g.contribution_, AllocateOnDevice(ctx, MemoryCategory::kWorkspace, ctx.compute_dtype, 4 * l.c));
    for (int i = 0; i < 4; ++i) {
      if (g.targets_[i].data == nullptr) continue;  // frozen: skipped, as without tp
      g.views_[i] = TpRowSlice(View(g.contribution_, {4, l.c}), i, 4);
      g.views_[i].shape = {l.c};
    }
    return g;
  }
  // What a LayerNorm backward accumulates into: ln_1 (0) or ln_2 (1).
  const TensorView& weight(int ln) const { return views_[2 * ln]; }
  const TensorView& bias(int ln) const { return views_[2 * ln + 1]; }

  // Sequence parallel: the contribution summed over tp, added into grads.
  absl::Status Commit(const UnitContext& uctx, const std::string& unit) {
    if (contribution_.empty()) return absl::OkStatus();
    const ComputeContext& ctx = uctx.compute;
    RETURN_IF_ERROR(TpAllReduceSum(uctx.parallel, ctx, View(contribution_, {contribution_.numel()}),
                                   absl::StrCat(unit, " LayerNorm gradients")));
    for (int i = 0; i < 4; ++i) {
      if (targets_[i].data == nullptr) continue;
      RETURN_IF_ERROR(kernels::AddInPlace(ctx.kernels, targets_[i].data, views_[i].data, views_[i].numel(),
                                          ctx.compute_dtype));
    }
    contribution_.Reset();
    return absl::OkStatus();
  }

 private:
  bool any_ = false;
  TensorView targets_[4];
  TensorView views_[4];
  Buffer contribution_;
};

}  // namespace

// ---------------------------------------------------------------------------
// h.i

Gpt2BlockUnit::Gpt2BlockUnit(const Gpt2Config& config, int layer)
    : NamedUnit(absl::StrCat("h.", layer)),
      c_(config.n_embd),
      nh_(config.n_head),
      ln_1_(absl::StrCat(name_, ".ln_1"), c_, kGpt2LayerNormEps),
      ln_2_(absl::StrCat(name_, ".ln_2"), c_, kGpt2LayerNormEps) {
  // GPT-2 scales the residual projections' init by 1/sqrt(2 * n_layer).
  const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(config.n_layer));
  const std::string p = name_ + ".";
  auto split = [](ParamSpec spec, Partition partition) {
    spec.partition = partition;
    return spec;
  };
  // Megatron's layout (docs/model.md, "Tensor parallelism"): column-parallel
  // c_attn (q|k|v blocks each cut, whole heads per rank) and c_fc, row-parallel
  // projections, everything else replicated.
  params_ = {
      NoDecay(Spec(p + "ln_1.weight", {c_}, InitKind::kOnes)),
      NoDecay(Spec(p + "ln_1.bias", {c_}, InitKind::kZeros)),
      split(Spec(p + "attn.c_attn.weight", {c_, 3 * c_}, InitKind::kNormal), Partition::Split(1, /*blocks=*/3)),
      split(NoDecay(Spec(p + "attn.c_attn.bias", {3 * c_}, InitKind::kZeros)), Partition::Split(0, /*blocks=*/3)),
      split(Spec(p + "attn.c_proj.weight", {c_, c_}, InitKind::kNormal, proj_std), Partition::Split(0)),
      NoDecay(Spec(p + "attn.c_proj.bias", {c_}, InitKind::kZeros)),
      NoDecay(Spec(p + "ln_2.weight", {c_}, InitKind::kOnes)),
      NoDecay(Spec(p + "ln_2.bias", {c_}, InitKind::kZeros)),
      split(Spec(p + "mlp.c_fc.weight", {c_, 4 * c_}, InitKind::kNormal), Partition::Split(1)),
      split(NoDecay(Spec(p + "mlp.c_fc.bias", {4 * c_}, InitKind::kZeros)), Partition::Split(0)),
      split(Spec(p + "mlp.c_proj.weight", {4 * c_, c_}, InitKind::kNormal, proj_std), Partition::Split(0)),
      NoDecay(Spec(p + "mlp.c_proj.bias", {c_}, InitKind::kZeros)),
  };
}

Gpt2BlockUnit::TpLayers Gpt2BlockUnit::Layers(int tp) const {
  return TpLayers{Linear(absl::StrCat(name_, ".attn.c_attn"), c_, 3 * c_ / tp),
                  Linear(absl::StrCat(name_, ".attn.c_proj"), c_ / tp, c_),
                  Linear(absl::StrCat(name_, ".mlp.c_fc"), c_, 4 * c_ / tp),
                  Linear(absl::StrCat(name_, ".mlp.c_proj"), 4 * c_ / tp, c_), CausalSelfAttention(c_ / tp, nh_ / tp)};
}

namespace {
enum BlockParam { kLn1W, kLn1B, kAttnW, kAttnB, kAttnProjW, kAttnProjB, kLn2W, kLn2B, kFcW, kFcB, kFcProjW, kFcProjB };

// A row-parallel layer's output, `out` (nl, C): at tp 1 the layer as is;
// at tp > 1 its partial product (n, C) without bias, summed over tp
// (all-reduced in place into `out`, or reduce-scattered into it with
// sequence parallelism, through a (n, C) workspace), then the replicated
// bias added once.
absl::Status RowParallelForward(const UnitContext& uctx, const BlockLayout& l, const Linear& layer,
                                const std::string& name, const TensorView& weight, const TensorView& bias,
                                const TensorView& x, const TensorView& out) {
  const ComputeContext& ctx = uctx.compute;
  if (!l.split()) return layer.Forward(ctx, weight, bias, x, out);
  RETURN_IF_ERROR(CheckTensor(bias, absl::StrCat(name, ".bias"), ctx.compute_dtype, {l.c}, ctx.kernels.device));
  const std::string what = absl::StrCat(name, " output");
  if (l.sp) {
    ASSIGN_OR_RETURN(Buffer partial,
                     AllocateOutputOnDevice(ctx, MemoryCategory::kWorkspace, ctx.compute_dtype, l.n * l.c));
    RETURN_IF_ERROR(layer.Forward(ctx, weight, kNone, x, View(partial, {l.n, l.c})));
    RETURN_IF_ERROR(TpReduceScatterRows(uctx.parallel, ctx, View(partial, {l.n, l.c}), out, what));
  } else {
    RETURN_IF_ERROR(layer.Forward(ctx, weight, kNone, x, out));
    RETURN_IF_ERROR(TpAllReduceSum(uctx.parallel, ctx, out, what));
  }
  return kernels::BiasAdd(ctx.kernels, out.data, bias.data, l.nl, l.c, ctx.compute_dtype);
}

// A column-parallel layer's input gradient, once its partial dx (n, C) is
// summed over tp: `partial` itself (all-reduced in place) or, with sequence
// parallelism, `local` (nl, C) (reduce-scattered into). Nothing at tp 1.
absl::StatusOr<TensorView> SumColumnParallelInputGrad(const UnitContext& uctx, const BlockLayout& l,
                                                      const TensorView& partial, const TensorView& local,
                                                      const std::string& what) {
  if (!l.split()) return partial;
  if (l.sp) {
    RETURN_IF_ERROR(TpReduceScatterRows(uctx.parallel, uctx.compute, partial, local, what));
    return local;
  }
  RETURN_IF_ERROR(TpAllReduceSum(uctx.parallel, uctx.compute, partial, what));
  return partial;
}

// A column-parallel layer's input for its weight gradient: the saved
// LayerNorm output `local` (nl, C), gathered over tp into `gathered` (n, C)
// with sequence parallelism (counted in `category`).
absl::StatusOr<TensorView> ColumnParallelInput(const UnitContext& uctx, const BlockLayout& l, const Buffer& local,
                                               Buffer* gathered, const std::string& what,
                                               MemoryCategory category = MemoryCategory::kWorkspace) {
  const TensorView v = View(local, {l.nl, l.c});
  if (!l.sp) return v;
  ASSIGN_OR_RETURN(*gathered, AllocateOutputOnDevice(uctx.compute, category, uctx.compute.compute_dtype, l.n * l.c));
  RETURN_IF_ERROR(TpAllGatherRows(uctx.parallel, uctx.compute, v, View(*gathered, {l.n, l.c}), what));
  return View(*gathered, {l.n, l.c});
}

// The saved LayerNorm output `saved` as its column-parallel layer's weight
// gradient reads it: as kept (all n rows) when the forward kept it
// gathered, else ColumnParallelInput's.
absl::StatusOr<TensorView> SavedColumnParallelInput(const UnitContext& uctx, const BlockLayout& l,
                                                    bool kept_gathered, const Buffer& saved, Buffer* gathered,
                                                    const std::string& what) {
  if (kept_gathered) return View(saved, {l.n, l.c});
  return ColumnParallelInput(uctx, l, saved, gathered, what);
}

// Selective checkpointing: a LayerNorm's output (nl, C) rebuilt from its
// saved input by the forward's kernel on the same values, so bitwise the
// dropped one (its statistics, bitwise the saved ones, are discarded).
absl::StatusOr<Buffer> RecomputeLayerNorm(const ComputeContext& ctx, const BlockLayout& l, const LayerNorm& ln,
                                          const TensorView& weight, const TensorView& bias, const Buffer& input,
                                          MemoryCategory category) {
  ASSIGN_OR_RETURN(Buffer out, AllocateOutputOnDevice(ctx, category, ctx.compute_dtype, l.nl * l.c));
  ASSIGN_OR_RETURN(Buffer mean, AllocateOutputOnDevice(ctx, MemoryCategory::kWorkspace, DType::kF32, l.nl));
  ASSIGN_OR_RETURN(Buffer rstd, AllocateOutputOnDevice(ctx, MemoryCategory::kWorkspace, DType::kF32, l.nl));
  RETURN_IF_ERROR(ln.Forward(ctx, weight, bias, View(input, {l.nl, l.c}), View(out, {l.nl, l.c}),
                             View(mean, {l.nl}), View(rstd, {l.nl})));
  return out;
}

// Selective checkpointing: gelu(fch) (n, 4C/tp), as the selective forward
// computed it.
absl::StatusOr<Buffer> RecomputeGelu(const ComputeContext& ctx, const BlockLayout& l, const Gelu& gelu,
                                     const Buffer& fch, MemoryCategory category) {
  ASSIGN_OR_RETURN(Buffer out, AllocateOutputOnDevice(ctx, category, ctx.compute_dtype, l.n * l.cf));
  RETURN_IF_ERROR(gelu.Forward(ctx, View(fch, {l.n, l.cf}), View(out, {l.n, l.cf})));
  return out;
}
}  // namespace

absl::Status Gpt2BlockUnit::Forward(const UnitContext& uctx, absl::Span<const TensorView> params,
                                    const Batch& batch, absl::Span<const TensorView> ins, UnitOutput* out,
                                    std::unique_ptr<SavedActivations>* saved) const {
  const ComputeContext& ctx = uctx.compute;
  RETURN_IF_ERROR(CheckParamCount(name_, params, 12, "parameter"));
  ASSIGN_OR_RETURN(const TensorView in, OnlyInput(name_, ins));
  ASSIGN_OR_RETURN(BlockLayout l, CheckGroup(name_, nh_, uctx));
  const DType dt = ctx.compute_dtype;
  const Device dev = ctx.kernels.device;
  if (l.sp) {
    // (N/tp, C): rank r's rows of the (B·T, C) activation; B and T from the batch.
    ASSIGN_OR_RETURN(const auto bt, BatchShape(ctx, batch, /*need_targets=*/false));
    ASSIGN_OR_RETURN(const int64_t rows,
                     TpLocalRows(bt.first * bt.second, l.tp, absl::StrCat(name_, " sequence-parallel input")));
    SetShapes(l, bt.first, bt.second, c_, nh_);
    RETURN_IF_ERROR(CheckTensor(in, absl::StrCat(name_, " input"), dt, {rows, c_}, dev));
  } else {
    const int64_t b = in.shape.size() == 3 ? in.shape[0] : -1;
    const int64_t t = in.shape.size() == 3 ? in.shape[1] : -1;
    RETURN_IF_ERROR(CheckTensor(in, absl::StrCat(name_, " input"), dt, {b, t, c_}, dev));
    SetShapes(l, b, t, c_, nh_);
  }
  const TpLayers layers = Layers(l.tp);
  const int64_t b = l.b, t = l.t, n = l.n, nl = l.nl;
  const auto act = MemoryCategory::kActivations;
  auto s = std::make_unique<BlockSaved>();
  s->layout = l;
  s->selective = uctx.training && uctx.selective_checkpoint;
  s->keep_gathered = uctx.training && l.sp && uctx.parallel.keep_gathered_ln_outputs && !s->selective;
  // What selective checkpointing drops lives only through the forward; with
  // the gathered LayerNorm outputs kept, their local rows do too.
  const auto dropped = s->selective ? MemoryCategory::kWorkspace : act;
  const auto ln_local = s->selective || s->keep_gathered ? MemoryCategory::kWorkspace : act;
  const auto gathered_category = s->keep_gathered ? act : MemoryCategory::kWorkspace;
  ASSIGN_OR_RETURN(s->x, CopyOf(ctx, in, act));
  ASSIGN_OR_RETURN(s->ln1, AllocateOutputOnDevice(ctx, ln_local, dt, nl * c_));
  ASSIGN_OR_RETURN(s->ln1_mean, AllocateOutputOnDevice(ctx, act, DType::kF32, nl));
  ASSIGN_OR_RETURN(s->ln1_rstd, AllocateOutputOnDevice(ctx, act, DType::kF32, nl));
  ASSIGN_OR_RETURN(s->qkv, AllocateOutputOnDevice(ctx, act, dt, n * l.cq));
  ASSIGN_OR_RETURN(s->att_lse, AllocateOutputOnDevice(ctx, act, DType::kF32, b * l.nh * t));
  ASSIGN_OR_RETURN(s->atty, AllocateOutputOnDevice(ctx, act, dt, n * l.ca));
  ASSIGN_OR_RETURN(s->res2, AllocateOutputOnDevice(ctx, act, dt, nl * c_));
  ASSIGN_OR_RETURN(s->ln2, AllocateOutputOnDevice(ctx, ln_local, dt, nl * c_));
  ASSIGN_OR_RETURN(s->ln2_mean, AllocateOutputOnDevice(ctx, act, DType::kF32, nl));
  ASSIGN_OR_RETURN(s->ln2_rstd, AllocateOutputOnDevice(ctx, act, DType::kF32, nl));
  ASSIGN_OR_RETURN(s->fch, AllocateOutputOnDevice(ctx, act, dt, n * l.cf));
  ASSIGN_OR_RETURN(s->fch_gelu, AllocateOutputOnDevice(ctx, dropped, dt, n * l.cf));
  ASSIGN_OR_RETURN(Buffer y_buf, AllocateOutputOnDevice(ctx, act, dt, nl * c_));

  const TensorView x = View(s->x, {nl, c_});
  const TensorView res2 = View(s->res2, {nl, c_});
  const TensorView y = View(y_buf, {nl, c_});
  // Attention branch: res2 = x + c_proj(attn(c_attn(ln_1(x)))).
  RETURN_IF_ERROR(ln_1_.Forward(ctx, params[kLn1W], params[kLn1B], x, View(s->ln1, {nl, c_}),
                                View(s->ln1_mean, {nl}), View(s->ln1_rstd, {nl})));
  {
    Buffer gathered;  // sequence parallel: ln_1's output on every row, for c_attn (and kept, if asked)
    ASSIGN_OR_RETURN(const TensorView ln1, ColumnParallelInput(uctx, l, s->ln1, &gathered,
                                                               absl::StrCat(name_, ".ln_1 output"), gathered_category));
    RETURN_IF_ERROR(layers.c_attn.Forward(ctx, params[kAttnW], params[kAttnB], ln1, View(s->qkv, {n, l.cq})));
    if (s->keep_gathered) s->ln1 = std::move(gathered);
  }
  if (s->selective) s->ln1.Reset();
  RETURN_IF_ERROR(layers.attn.Forward(ctx, View(s->qkv, {b, t, l.cq}), View(s->atty, {b, t, l.ca}),
                                      View(s->att_lse, {b, l.nh, t})));
  RETURN_IF_ERROR(RowParallelForward(uctx, l, layers.attn_c_proj, name_ + ".attn.c_proj", params[kAttnProjW],
                                     params[kAttnProjB], View(s->atty, {n, l.ca}), res2));
  RETURN_IF_ERROR(kernels::ResidualForward(ctx.kernels, res2.data, res2.data, x.data, nl * c_, dt));
  // MLP branch: out = res2 + c_proj(gelu(c_fc(ln_2(res2)))).
  RETURN_IF_ERROR(ln_2_.Forward(ctx, params[kLn2W], params[kLn2B], res2, View(s->ln2, {nl, c_}),
                                View(s->ln2_mean, {nl}), View(s->ln2_rstd, {nl})));
  {
    Buffer gathered;
    ASSIGN_OR_RETURN(const TensorView ln2, ColumnParallelInput(uctx, l, s->ln2, &gathered,
                                                               absl::StrCat(name_, ".ln_2 output"), gathered_category));
    if (s->selective) {
      // The GELU the backward recomputes with: the same kernel on the same
      // fch (on the CPU bitwise ForwardGelu's; on CUDA cuBLASLt's fused
      // epilogue is not used).
      RETURN_IF_ERROR(layers.c_fc.Forward(ctx, params[kFcW], params[kFcB], ln2, View(s->fch, {n, l.cf})));
      RETURN_IF_ERROR(gelu_.Forward(ctx, View(s->fch, {n, l.cf}), View(s->fch_gelu, {n, l.cf})));
    } else {
      // c_fc and GELU in one call (one fused matmul on CUDA); fch keeps GELU's input for the backward.
      RETURN_IF_ERROR(layers.c_fc.ForwardGelu(ctx, params[kFcW], params[kFcB], ln2, View(s->fch, {n, l.cf}),
                                              View(s->fch_gelu, {n, l.cf})));
    }
    if (s->keep_gathered) s->ln2 = std::move(gathered);
  }
  if (s->selective) s->ln2.Reset();
  RETURN_IF_ERROR(RowParallelForward(uctx, l, layers.mlp_c_proj, name_ + ".mlp.c_proj", params[kFcProjW],
                                     params[kFcProjB], View(s->fch_gelu, {n, l.cf}), y));
  if (s->selective) s->fch_gelu.Reset();
  RETURN_IF_ERROR(kernels::ResidualForward(ctx.kernels, y.data, y.data, res2.data, nl * c_, dt));
  if (l.sp) {
    out->activations.Add(std::move(y_buf), {nl, c_});
  } else {
    out->activations.Add(std::move(y_buf), {b, t, c_});
  }
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
  ASSIGN_OR_RETURN(const BlockSaved* s, CheckBlockBackward(name_, c_, nh_, uctx, saved_base, grad_out));
  const BlockLayout& l = s->layout;
  const TpLayers layers = Layers(l.tp);
  const DType dt = ctx.compute_dtype;
  const int64_t b = l.b, t = l.t, n = l.n, nl = l.nl;
  const auto ws = MemoryCategory::kWorkspace;
  const TensorView dy = Reshaped(grad_out, {nl, c_});
  // dres2 = dout + (ln_2 branch's input grad), on this rank's rows; with
  // sequence parallelism the rank's slice of an (n, C) buffer, gathered in
  // place before attn.c_proj's backward.
  Buffer dres2;
  TensorView dres2_local, dres2_all;
  if (l.sp) {
    ASSIGN_OR_RETURN(dres2, AllocateOutputOnDevice(ctx, ws, dt, n * c_));
    dres2_all = View(dres2, {n, c_});
    dres2_local = TpRowSlice(dres2_all, l.rank, l.tp);
    RETURN_IF_ERROR(CopyInto(ctx, dres2_local, dy));
  } else {
    ASSIGN_OR_RETURN(dres2, CopyOf(ctx, dy, ws));
    dres2_local = dres2_all = View(dres2, {n, c_});
  }
  ASSIGN_OR_RETURN(Buffer dfch, AllocateOutputOnDevice(ctx, ws, dt, n * l.cf));
  ASSIGN_OR_RETURN(Buffer dnc, AllocateOutputOnDevice(ctx, ws, dt, n * c_));    // an (n,C) input grad
  ASSIGN_OR_RETURN(Buffer dtmp, AllocateOutputOnDevice(ctx, ws, dt, nl * c_));  // LayerNorm input grads
  ASSIGN_OR_RETURN(Buffer dqkv, AllocateOutputOnDevice(ctx, ws, dt, n * l.cq));
  Buffer dln_local;  // sequence parallel: a column-parallel input grad, reduce-scattered
  if (l.sp) {
    ASSIGN_OR_RETURN(dln_local, AllocateOutputOnDevice(ctx, ws, dt, nl * c_));
  }
  ASSIGN_OR_RETURN(LayerNormGrads ln_grads,
                   LayerNormGrads::Create(ctx, l, {grads[kLn1W], grads[kLn1B], grads[kLn2W], grads[kLn2B]}));
  const TensorView dnc_all = View(dnc, {n, c_});
  const TensorView dln_l = l.sp ? View(dln_local, {nl, c_}) : kNone;
  const TensorView fch = View(s->fch, {n, l.cf});
  {
    Buffer dy_gathered;  // sequence parallel: the output grad on every row
    TensorView dy_all = dy;
    if (l.sp) {
      ASSIGN_OR_RETURN(dy_gathered, AllocateOutputOnDevice(ctx, ws, dt, n * c_));
      dy_all = View(dy_gathered, {n, c_});
      RETURN_IF_ERROR(TpAllGatherRows(uctx.parallel, ctx, dy, dy_all, absl::StrCat(name_, " output grad")));
    }
    Buffer gelu_rebuilt;  // selective: only while its weight gradient needs it
    const Buffer* gelu_out = &s->fch_gelu;
    if (s->selective && grads[kFcProjW].data != nullptr) {
      ASSIGN_OR_RETURN(gelu_rebuilt, RecomputeGelu(ctx, l, gelu_, s->fch, ws));
      gelu_out = &gelu_rebuilt;
    }
    RETURN_IF_ERROR(layers.mlp_c_proj.Backward(ctx, params[kFcProjW], View(*gelu_out, {n, l.cf}), dy_all,
                                               View(dfch, {n, l.cf}), grads[kFcProjW], grads[kFcProjB]));
  }
  RETURN_IF_ERROR(gelu_.Backward(ctx, fch, View(dfch, {n, l.cf}), View(dfch, {n, l.cf})));
  {
    Buffer gathered, rebuilt;
    TensorView ln2 = View(s->ln2, {nl, c_});
    if (grads[kFcW].data != nullptr) {
      const Buffer* local = &s->ln2;
      if (s->selective) {
        ASSIGN_OR_RETURN(rebuilt, RecomputeLayerNorm(ctx, l, ln_2_, params[kLn2W], params[kLn2B], s->res2, ws));
        local = &rebuilt;
      }
      ASSIGN_OR_RETURN(ln2, SavedColumnParallelInput(uctx, l, s->keep_gathered, *local, &gathered,
                                                     absl::StrCat(name_, ".ln_2 output")));
    }
    RETURN_IF_ERROR(layers.c_fc.Backward(ctx, params[kFcW], ln2, View(dfch, {n, l.cf}), dnc_all, grads[kFcW],
                                         grads[kFcB]));
  }
  ASSIGN_OR_RETURN(const TensorView dln2,
                   SumColumnParallelInputGrad(uctx, l, dnc_all, dln_l, absl::StrCat(name_, ".mlp.c_fc input grad")));
  RETURN_IF_ERROR(ln_2_.Backward(ctx, params[kLn2W], View(s->res2, {nl, c_}), View(s->ln2_mean, {nl}),
                                 View(s->ln2_rstd, {nl}), dln2, View(dtmp, {nl, c_}), ln_grads.weight(1),
                                 ln_grads.bias(1)));
  RETURN_IF_ERROR(kernels::AddInPlace(ctx.kernels, dres2_local.data, dtmp.data(), nl * c_, dt));
  if (l.sp) {
    RETURN_IF_ERROR(TpAllGatherRows(uctx.parallel, ctx, dres2_local, dres2_all,
                                    absl::StrCat(name_, ".attn.c_proj output grad")));
  }
  RETURN_IF_ERROR(layers.attn_c_proj.Backward(ctx, params[kAttnProjW], View(s->atty, {n, l.ca}), dres2_all,
                                              Reshaped(dnc_all, {n, l.ca}), grads[kAttnProjW], grads[kAttnProjB]));
  RETURN_IF_ERROR(layers.attn.Backward(ctx, View(s->qkv, {b, t, l.cq}), View(s->atty, {b, t, l.ca}),
                                       View(s->att_lse, {b, l.nh, t}), Reshaped(dnc_all, {b, t, l.ca}),
                                       View(dqkv, {b, t, l.cq})));
  {
    Buffer gathered, rebuilt;
    TensorView ln1 = View(s->ln1, {nl, c_});
    if (grads[kAttnW].data != nullptr) {
      const Buffer* local = &s->ln1;
      if (s->selective) {
        ASSIGN_OR_RETURN(rebuilt, RecomputeLayerNorm(ctx, l, ln_1_, params[kLn1W], params[kLn1B], s->x, ws));
        local = &rebuilt;
      }
      ASSIGN_OR_RETURN(ln1, SavedColumnParallelInput(uctx, l, s->keep_gathered, *local, &gathered,
                                                     absl::StrCat(name_, ".ln_1 output")));
    }
    RETURN_IF_ERROR(layers.c_attn.Backward(ctx, params[kAttnW], ln1, View(dqkv, {n, l.cq}), dnc_all, grads[kAttnW],
                                           grads[kAttnB]));
  }
  ASSIGN_OR_RETURN(const TensorView dln1, SumColumnParallelInputGrad(uctx, l, dnc_all, dln_l,
                                                                     absl::StrCat(name_, ".attn.c_attn input grad")));
  ASSIGN_OR_RETURN(Buffer dx, AllocateOutputOnDevice(ctx, MemoryCategory::kActivations, dt, nl * c_));
  RETURN_IF_ERROR(ln_1_.Backward(ctx, params[kLn1W], View(s->x, {nl, c_}), View(s->ln1_mean, {nl}),
                                 View(s->ln1_rstd, {nl}), dln1, View(dx, {nl, c_}), ln_grads.weight(0),
                                 ln_grads.bias(0)));
  RETURN_IF_ERROR(kernels::AddInPlace(ctx.kernels, dx.data(), dres2_local.data, nl * c_, dt));
  RETURN_IF_ERROR(ln_grads.Commit(uctx, name_));
  grad_in->Clear();
  if (l.sp) {
    grad_in->Add(std::move(dx), {nl, c_});
  } else {
    grad_in->Add(std::move(dx), {b, t, c_});
  }
  return absl::OkStatus();
}

// The same kernels on the same values as Backward, with the weight-gradient
// parts skipped; each layer's output gradient lands in *weight_inputs. The
// input-gradient collectives are Backward's; the weight ones wait for
// BackwardWeight.
absl::Status Gpt2BlockUnit::BackwardInput(const UnitContext& uctx, absl::Span<const TensorView> params,
                                          const Batch& /*batch*/, const SavedActivations& saved_base,
                                          absl::Span<const TensorView> grad_outs, ActivationPack* grad_in,
                                          std::unique_ptr<SavedActivations>* weight_inputs) const {
  const ComputeContext& ctx = uctx.compute;
  RETURN_IF_ERROR(CheckParamCount(name_, params, 12, "parameter"));
  ASSIGN_OR_RETURN(const TensorView grad_out, OnlyInput(name_ + " output grad", grad_outs));
  ASSIGN_OR_RETURN(const BlockSaved* s, CheckBlockBackward(name_, c_, nh_, uctx, saved_base, grad_out));
  const BlockLayout& l = s->layout;
  const TpLayers layers = Layers(l.tp);
  const DType dt = ctx.compute_dtype;
  const int64_t b = l.b, t = l.t, n = l.n, nl = l.nl;
  const auto act = MemoryCategory::kActivations;
  const TensorView dy_in = Reshaped(grad_out, {nl, c_});
  auto w = std::make_unique<BlockWeightInputs>();
  TensorView dres2_local, dres2;
  if (l.sp) {
    ASSIGN_OR_RETURN(w->dy, AllocateOutputOnDevice(ctx, act, dt, n * c_));
    ASSIGN_OR_RETURN(w->dfch, AllocateOutputOnDevice(ctx, act, dt, n * l.cf));
    ASSIGN_OR_RETURN(w->dln2, AllocateOutputOnDevice(ctx, act, dt, nl * c_));
    ASSIGN_OR_RETURN(w->dres2, AllocateOutputOnDevice(ctx, act, dt, n * c_));
    dres2 = View(w->dres2, {n, c_});
    dres2_local = TpRowSlice(dres2, l.rank, l.tp);
    RETURN_IF_ERROR(CopyInto(ctx, dres2_local, dy_in));  // += ln_2's input grad below
  } else {
    ASSIGN_OR_RETURN(w->dy, CopyOf(ctx, dy_in, act));
    ASSIGN_OR_RETURN(w->dfch, AllocateOutputOnDevice(ctx, act, dt, n * l.cf));
    ASSIGN_OR_RETURN(w->dln2, AllocateOutputOnDevice(ctx, act, dt, n * c_));
    ASSIGN_OR_RETURN(w->dres2, CopyOf(ctx, dy_in, act));  // += ln_2's input grad below
    dres2_local = dres2 = View(w->dres2, {n, c_});
  }
  ASSIGN_OR_RETURN(w->dqkv, AllocateOutputOnDevice(ctx, act, dt, n * l.cq));
  ASSIGN_OR_RETURN(w->dln1, AllocateOutputOnDevice(ctx, act, dt, nl * c_));
  const auto ws = MemoryCategory::kWorkspace;
  ASSIGN_OR_RETURN(Buffer datty, AllocateOutputOnDevice(ctx, ws, dt, n * l.ca));  // attention output grad
  ASSIGN_OR_RETURN(Buffer dtmp, AllocateOutputOnDevice(ctx, ws, dt, nl * c_));    // ln_2 input grad
  Buffer dnc;  // sequence parallel: a column-parallel layer's partial input grad (n, C)
  if (l.sp) {
    ASSIGN_OR_RETURN(dnc, AllocateOutputOnDevice(ctx, ws, dt, n * c_));
  }
  const TensorView dy = View(w->dy, {l.sp ? n : nl, c_});
  const TensorView dfch = View(w->dfch, {n, l.cf});
  const TensorView dln2 = View(w->dln2, {nl, c_});
  const TensorView dln1 = View(w->dln1, {nl, c_});
  const TensorView partial = l.sp ? View(dnc, {n, c_}) : kNone;
  if (l.sp) RETURN_IF_ERROR(TpAllGatherRows(uctx.parallel, ctx, dy_in, dy, absl::StrCat(name_, " output grad")));
  RETURN_IF_ERROR(layers.mlp_c_proj.Backward(ctx, params[kFcProjW], kNone, dy, dfch, kNone, kNone));
  RETURN_IF_ERROR(gelu_.Backward(ctx, View(s->fch, {n, l.cf}), dfch, dfch));
  RETURN_IF_ERROR(layers.c_fc.Backward(ctx, params[kFcW], kNone, dfch, l.sp ? partial : dln2, kNone, kNone));
  RETURN_IF_ERROR(SumColumnParallelInputGrad(uctx, l, l.sp ? partial : dln2, dln2,
                                             absl::StrCat(name_, ".mlp.c_fc input grad"))
                      .status());
  RETURN_IF_ERROR(ln_2_.Backward(ctx, params[kLn2W], View(s->res2, {nl, c_}), View(s->ln2_mean, {nl}),
                                 View(s->ln2_rstd, {nl}), dln2, View(dtmp, {nl, c_}), kNone, kNone));
  RETURN_IF_ERROR(kernels::AddInPlace(ctx.kernels, dres2_local.data, dtmp.data(), nl * c_, dt));
  if (l.sp) {
    RETURN_IF_ERROR(TpAllGatherRows(uctx.parallel, ctx, dres2_local, dres2,
                                    absl::StrCat(name_, ".attn.c_proj output grad")));
  }
  RETURN_IF_ERROR(
      layers.attn_c_proj.Backward(ctx, params[kAttnProjW], kNone, dres2, View(datty, {n, l.ca}), kNone, kNone));
  RETURN_IF_ERROR(layers.attn.Backward(ctx, View(s->qkv, {b, t, l.cq}), View(s->atty, {b, t, l.ca}),
                                       View(s->att_lse, {b, l.nh, t}), View(datty, {b, t, l.ca}),
                                       View(w->dqkv, {b, t, l.cq})));
  RETURN_IF_ERROR(
      layers.c_attn.Backward(ctx, params[kAttnW], kNone, View(w->dqkv, {n, l.cq}), l.sp ? partial : dln1, kNone, kNone));
  RETURN_IF_ERROR(SumColumnParallelInputGrad(uctx, l, l.sp ? partial : dln1, dln1,
                                             absl::StrCat(name_, ".attn.c_attn input grad"))
                      .status());
  ASSIGN_OR_RETURN(Buffer dx, AllocateOutputOnDevice(ctx, act, dt, nl * c_));
  RETURN_IF_ERROR(ln_1_.Backward(ctx, params[kLn1W], View(s->x, {nl, c_}), View(s->ln1_mean, {nl}),
                                 View(s->ln1_rstd, {nl}), dln1, View(dx, {nl, c_}), kNone, kNone));
  RETURN_IF_ERROR(kernels::AddInPlace(ctx.kernels, dx.data(), dres2_local.data, nl * c_, dt));
  if (s->selective) {
    ASSIGN_OR_RETURN(w->ln1, RecomputeLayerNorm(ctx, l, ln_1_, params[kLn1W], params[kLn1B], s->x, act));
    ASSIGN_OR_RETURN(w->ln2, RecomputeLayerNorm(ctx, l, ln_2_, params[kLn2W], params[kLn2B], s->res2, act));
    ASSIGN_OR_RETURN(w->fch_gelu, RecomputeGelu(ctx, l, gelu_, s->fch, act));
  }
  grad_in->Clear();
  if (l.sp) {
    grad_in->Add(std::move(dx), {nl, c_});
  } else {
    grad_in->Add(std::move(dx), {b, t, c_});
  }
  *weight_inputs = std::move(w);
  return absl::OkStatus();
}

absl::Status Gpt2BlockUnit::BackwardWeight(const UnitContext& uctx, absl::Span<const TensorView> grads,
                                           const Batch& /*batch*/, const SavedActivations& saved_base,
                                           const SavedActivations& weight_inputs) const {
  const ComputeContext& ctx = uctx.compute;
  RETURN_IF_ERROR(CheckParamCount(name_, grads, 12, "gradient"));
  ASSIGN_OR_RETURN(const BlockSaved* s, SavedOf(name_, nh_, uctx, saved_base));
  ASSIGN_OR_RETURN(const BlockWeightInputs* w, WeightInputsAs<BlockWeightInputs>(name_, weight_inputs));
  const BlockLayout& l = s->layout;
  const TpLayers layers = Layers(l.tp);
  const int64_t n = l.n, nl = l.nl;
  const int64_t dy_rows = l.sp ? n : nl;
  if (w->dy.numel() != dy_rows * c_) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": weight inputs have ", w->dy.numel() / c_,
                                                   " rows but the saved forward had ", dy_rows));
  }
  ASSIGN_OR_RETURN(LayerNormGrads ln_grads,
                   LayerNormGrads::Create(ctx, l, {grads[kLn1W], grads[kLn1B], grads[kLn2W], grads[kLn2B]}));
  // Selective: what the forward dropped, as BackwardInput rebuilt it.
  const Buffer& saved_ln1 = s->selective ? w->ln1 : s->ln1;
  const Buffer& saved_ln2 = s->selective ? w->ln2 : s->ln2;
  const Buffer& saved_gelu = s->selective ? w->fch_gelu : s->fch_gelu;
  // Each parameter's gradient gets exactly one += (Backward's), in any order;
  // the collectives come in the same order on every rank.
  if (!AllNull({&grads[kFcProjW], &grads[kFcProjB]})) {
    RETURN_IF_ERROR(layers.mlp_c_proj.Backward(ctx, kNone, View(saved_gelu, {n, l.cf}), View(w->dy, {dy_rows, c_}),
                                               kNone, grads[kFcProjW], grads[kFcProjB]));
  }
  if (!AllNull({&grads[kFcW], &grads[kFcB]})) {
    Buffer gathered;
    TensorView ln2 = View(saved_ln2, {nl, c_});
    if (grads[kFcW].data != nullptr) {
      ASSIGN_OR_RETURN(ln2, SavedColumnParallelInput(uctx, l, s->keep_gathered, saved_ln2, &gathered,
                                                     absl::StrCat(name_, ".ln_2 output")));
    }
    RETURN_IF_ERROR(layers.c_fc.Backward(ctx, kNone, ln2, View(w->dfch, {n, l.cf}), kNone, grads[kFcW], grads[kFcB]));
  }
  if (!AllNull({&grads[kLn2W], &grads[kLn2B]})) {
    RETURN_IF_ERROR(ln_2_.Backward(ctx, kNone, View(s->res2, {nl, c_}), View(s->ln2_mean, {nl}),
                                   View(s->ln2_rstd, {nl}), View(w->dln2, {nl, c_}), kNone, ln_grads.weight(1),
                                   ln_grads.bias(1)));
  }
  if (!AllNull({&grads[kAttnProjW], &grads[kAttnProjB]})) {
    RETURN_IF_ERROR(layers.attn_c_proj.Backward(ctx, kNone, View(s->atty, {n, l.ca}), View(w->dres2, {n, c_}), kNone,
                                                grads[kAttnProjW], grads[kAttnProjB]));
  }
  if (!AllNull({&grads[kAttnW], &grads[kAttnB]})) {
    Buffer gathered;
    TensorView ln1 = View(saved_ln1, {nl, c_});
    if (grads[kAttnW].data != nullptr) {
      ASSIGN_OR_RETURN(ln1, SavedColumnParallelInput(uctx, l, s->keep_gathered, saved_ln1, &gathered,
                                                     absl::StrCat(name_, ".ln_1 output")));
    }
    RETURN_IF_ERROR(layers.c_attn.Backward(ctx, kNone, ln1, View(w->dqkv, {n, l.cq}), kNone, grads[kAttnW],
                                           grads[kAttnB]));
  }
  if (!AllNull({&grads[kLn1W], &grads[kLn1B]})) {
    RETURN_IF_ERROR(ln_1_.Backward(ctx, kNone, View(s->x, {nl, c_}), View(s->ln1_mean, {nl}),
                                   View(s->ln1_rstd, {nl}), View(w->dln1, {nl, c_}), kNone, ln_grads.weight(0),
                                   ln_grads.bias(0)));
  }
  return ln_grads.Commit(uctx, name_);
}

// BlockSaved at tp 1: x, ln1, res2, ln2 (n, C), qkv (n, 3C), atty (n, C),
// fch and fch_gelu (n, 4C) in the compute dtype; ln1/ln2 mean and rstd (n)
// and att_lse (n·n_head) in f32. The output is (n, C).
int64_t Gpt2BlockUnit::EstimateSavedActivationBytes(int64_t batch, int64_t seq, DType compute) const {
  const int64_t n = batch * seq;
  return n * c_ * 16 * static_cast<int64_t>(DTypeSize(compute)) + n * (4 + nh_) * 4;
}
// Selective: without ln1, ln2 (n, C) and fch_gelu (n, 4C): 10·n·C elements.
int64_t Gpt2BlockUnit::EstimateSelectiveSavedActivationBytes(int64_t batch, int64_t seq, DType compute) const {
  const int64_t n = batch * seq;
  return n * c_ * 10 * static_cast<int64_t>(DTypeSize(compute)) + n * (4 + nh_) * 4;
}
int64_t Gpt2BlockUnit::EstimateOutputActivationBytes(int64_t batch, int64_t seq, DType compute) const {
  return batch * seq * c_ * static_cast<int64_t>(DTypeSize(compute));
}

}  // namespace zeroshard
