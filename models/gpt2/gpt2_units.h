// GPT-2's three kinds of unit (private to nn/; users call BuildGpt2).
// B batch, T sequence length, C channels, V vocab, L layers, N = B*T.
#ifndef ZEROSHARD_MODELS_GPT2_GPT2_UNITS_H_
#define ZEROSHARD_MODELS_GPT2_GPT2_UNITS_H_

#include <memory>
#include <string>
#include <vector>

#include "nn/causal_self_attention.h"
#include "nn/cross_entropy.h"
#include "nn/embedding.h"
#include "nn/gelu.h"
#include "models/gpt2/gpt2.h"
#include "nn/layernorm.h"
#include "nn/linear.h"
#include "nn/tied_lm_head.h"
#include "nn/unit.h"
#include "nn/vocab_parallel.h"

namespace zeroshard {

// The batch: "inputs" and "targets", i32 (B, T) each; targets[b, t] is the
// token that follows inputs[b, t].
//
// Tensor parallelism (docs/model.md, "Tensor parallelism"): at tp > 1, or
// with a padded vocabulary (Vp > V), "embed" and "head" are
// vocabulary-parallel: wte.weight arrives as this tp rank's rows
// [r·Vp/tp, (r+1)·Vp/tp) and the units issue their tp collectives on
// ctx.parallel.tp. Under sequence parallelism the activation between units
// is the rank's rows [r·N/tp, (r+1)·N/tp) of the flattened (N, C), shaped
// {N/tp, C}. At tp 1 without padding they compute exactly as before.
//
// "embed": out = wte[inputs] + wpe[t]. Saves nothing (tokens come from the batch).
class Gpt2EmbedUnit : public NamedUnit {
 public:
  explicit Gpt2EmbedUnit(const Gpt2Config& config);
  absl::Status Forward(const UnitContext& ctx, absl::Span<const TensorView> params, const Batch& batch,
                       absl::Span<const TensorView> in, UnitOutput* out,
                       std::unique_ptr<SavedActivations>* saved) const override;
  absl::Status Backward(const UnitContext& ctx, absl::Span<const TensorView> params,
                        absl::Span<const TensorView> grads, const Batch& batch, const SavedActivations& saved,
                        absl::Span<const TensorView> grad_out, ActivationPack* grad_in) const override;
  // B: nothing (grad_in stays empty), keeps a copy of the output grad (B,T,C),
  // or this rank's {N/tp, C} under sequence parallelism; W: the embeddings'
  // gradients from it (after a tp AllGather under sequence parallelism).
  int64_t EstimateSavedActivationBytes(int64_t batch, int64_t seq, DType compute) const override;
  int64_t EstimateOutputActivationBytes(int64_t batch, int64_t seq, DType compute) const override;
  bool SupportsSplitBackward() const override { return true; }
  absl::Status BackwardInput(const UnitContext& ctx, absl::Span<const TensorView> params, const Batch& batch,
                             const SavedActivations& saved, absl::Span<const TensorView> grad_out,
                             ActivationPack* grad_in, std::unique_ptr<SavedActivations>* weight_inputs) const override;
  absl::Status BackwardWeight(const UnitContext& ctx, absl::Span<const TensorView> grads, const Batch& batch,
                              const SavedActivations& saved, const SavedActivations& weight_inputs) const override;

 private:
  // tp > 1 or a padded vocabulary: the vocabulary-parallel path.
  bool VocabParallel(const ParallelContext& p) const { return p.tp_size > 1 || vp_ != v_; }
  // The output's (and its gradient's) shape: (B,T,C), or {N/tp, C}.
  absl::StatusOr<std::vector<int64_t>> OutputShape(const UnitContext& ctx, int64_t b, int64_t t) const;

  Embedding embedding_;
  vocab_parallel::VocabParallelEmbedding vp_embedding_;
  int64_t c_;
  int64_t v_, vp_;
};

// "h.i": x + attn(ln_1(x)), then + mlp(ln_2(.)). Saves its input and every
// intermediate backward reads (llm.c's activation set for one layer).
//
// Tensor parallelism (UnitContext::parallel, tp > 1; docs/model.md, "Tensor
// parallelism"): params are this rank's slices (LocalShape of params()),
// Megatron's layout: c_attn column-parallel in q|k|v blocks (a rank holds
// n_head/tp whole heads), attn.c_proj row-parallel, mlp.c_fc
// column-parallel, mlp.c_proj row-parallel; LayerNorms and the row-parallel
// biases replicated. The row-parallel outputs are all-reduced over tp (the
// bias added once, after it), the column-parallel input gradients
// all-reduced in backward. With sequence_parallel the activation between
// units is rank r's rows [r·N/tp, (r+1)·N/tp) of the (N, C) activation,
// shaped {N/tp, C} (B and T from the batch's "inputs"); LayerNorms and
// residuals run and are saved on those rows only, an all-gather builds each
// column-parallel input and a reduce-scatter replaces each all-reduce, and
// the LayerNorms' gradients (partial per rank) are all-reduced inside
// backward, so every replicated gradient comes out whole and bitwise equal
// on every tp rank. At tp 1 nothing of this runs.
class Gpt2BlockUnit : public NamedUnit {
 public:
  Gpt2BlockUnit(const Gpt2Config& config, int layer);
  absl::Status Forward(const UnitContext& ctx, absl::Span<const TensorView> params, const Batch& batch,
                       absl::Span<const TensorView> in, UnitOutput* out,
                       std::unique_ptr<SavedActivations>* saved) const override;
  absl::Status Backward(const UnitContext& ctx, absl::Span<const TensorView> params,
                        absl::Span<const TensorView> grads, const Batch& batch, const SavedActivations& saved,
                        absl::Span<const TensorView> grad_out, ActivationPack* grad_in) const override;
  // B: the input-gradient path (every linear's dX, attention, GELU, both
  // LayerNorms' dX) with its tp collectives, keeping the output grad of each
  // linear and LayerNorm: 11·B·T·C elements in compute dtype at tp 1
  // ((4 + 7/tp)·B·T·C at tp, (2 + 9/tp)·B·T·C with sequence parallelism,
  // which keeps both row-parallel output grads gathered). W: every dW, db and
  // LayerNorm dweight/dbias from those and the saved activations (with
  // sequence parallelism: re-gathering ln_1's and ln_2's outputs and
  // all-reducing the LayerNorms' gradients).
  int64_t EstimateSavedActivationBytes(int64_t batch, int64_t seq, DType compute) const override;
  int64_t EstimateOutputActivationBytes(int64_t batch, int64_t seq, DType compute) const override;
  // Selective checkpointing keeps x, qkv, the attention's lse and output,
  // res2, fch and both LayerNorms' statistics; ln_1's and ln_2's outputs and
  // GELU's are rebuilt in the backward, each just before the weight gradient
  // that reads it (BackwardInput rebuilds all three for BackwardWeight).
  bool SupportsSelectiveCheckpointing() const override { return true; }
  int64_t EstimateSelectiveSavedActivationBytes(int64_t batch, int64_t seq, DType compute) const override;
  bool SupportsSplitBackward() const override { return true; }
  absl::Status BackwardInput(const UnitContext& ctx, absl::Span<const TensorView> params, const Batch& batch,
                             const SavedActivations& saved, absl::Span<const TensorView> grad_out,
                             ActivationPack* grad_in, std::unique_ptr<SavedActivations>* weight_inputs) const override;
  absl::Status BackwardWeight(const UnitContext& ctx, absl::Span<const TensorView> grads, const Batch& batch,
                              const SavedActivations& saved, const SavedActivations& weight_inputs) const override;

 private:
  // The layers with parameters split `tp` ways: c_attn (C, 3C/tp),
  // attn.c_proj (C/tp, C), mlp.c_fc (C, 4C/tp), mlp.c_proj (4C/tp, C), and
  // attention over n_head/tp heads of C/n_head channels.
  struct TpLayers {
    Linear c_attn, attn_c_proj, c_fc, mlp_c_proj;
    CausalSelfAttention attn;
  };
  TpLayers Layers(int tp) const;

  int64_t c_;
  int64_t nh_;
  LayerNorm ln_1_, ln_2_;
  Gelu gelu_;
};

// "head": cross-entropy of ln_f(x) · wte^T against the targets, as (sum over
// the targets that are >= 0, their count); a negative target is ignored
// (padding). Owns ln_f.*, borrows wte.weight.
class Gpt2HeadUnit : public NamedUnit {
 public:
  explicit Gpt2HeadUnit(const Gpt2Config& config);
  std::vector<std::string> borrowed_params() const override { return {"wte.weight"}; }
  // B·T: every target counts when none is masked.
  double NominalLossWeight(const Batch& batch) const override;
  absl::Status Forward(const UnitContext& ctx, absl::Span<const TensorView> params, const Batch& batch,
                       absl::Span<const TensorView> in, UnitOutput* out,
                       std::unique_ptr<SavedActivations>* saved) const override;
  absl::Status Backward(const UnitContext& ctx, absl::Span<const TensorView> params,
                        absl::Span<const TensorView> grads, const Batch& batch, const SavedActivations& saved,
                        absl::Span<const TensorView> grad_out, ActivationPack* grad_in) const override;
  // B: dlogits, dlnf = dlogits·wte and ln_f's dX, keeping dlogits (B,T,V) and
  // dlnf (B,T,C). W: wte.weight's gradient and ln_f's dweight/dbias.
  // Vocabulary-parallel: dlogits are (N, Vp/tp), dlnf this rank's rows
  // (N/tp under sequence parallelism); W all-reduces ln_f's gradients over
  // tp under sequence parallelism.
  int64_t EstimateSavedActivationBytes(int64_t batch, int64_t seq, DType compute) const override;
  int64_t EstimateOutputActivationBytes(int64_t batch, int64_t seq, DType compute) const override;
  bool SupportsSplitBackward() const override { return true; }
  absl::Status BackwardInput(const UnitContext& ctx, absl::Span<const TensorView> params, const Batch& batch,
                             const SavedActivations& saved, absl::Span<const TensorView> grad_out,
                             ActivationPack* grad_in, std::unique_ptr<SavedActivations>* weight_inputs) const override;
  absl::Status BackwardWeight(const UnitContext& ctx, absl::Span<const TensorView> grads, const Batch& batch,
                              const SavedActivations& saved, const SavedActivations& weight_inputs) const override;

 private:
  bool VocabParallel(const ParallelContext& p) const { return p.tp_size > 1 || vp_ != v_; }
  absl::Status ForwardVocabParallel(const UnitContext& ctx, absl::Span<const TensorView> params, const Batch& batch,
                                    const TensorView& in, UnitOutput* out,
                                    std::unique_ptr<SavedActivations>* saved) const;
  // dlogits, and ln_f's output grad for this rank's rows (reduced over tp).
  absl::Status InputGradsVocabParallel(const UnitContext& ctx, const TensorView& wte_local, const Batch& batch,
                                       const SavedActivations& saved, absl::Span<const TensorView> grad_out,
                                       MemoryCategory category, Buffer* dlogits, Buffer* dlnf) const;
  // ln_f's backward on this rank's rows; under sequence parallelism its
  // parameter gradients are this call's contribution all-reduced over tp.
  absl::Status LnfBackwardVocabParallel(const UnitContext& ctx, const TensorView& weight,
                                        const SavedActivations& saved, const Buffer& dlnf, const TensorView& dx,
                                        const TensorView& dweight, const TensorView& dbias) const;

  int64_t c_;
  int64_t v_, vp_;
  LayerNorm ln_f_;
  TiedLmHead lm_head_;
  CrossEntropy cross_entropy_;
  vocab_parallel::VocabParallelCrossEntropy vp_cross_entropy_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_MODELS_GPT2_GPT2_UNITS_H_
