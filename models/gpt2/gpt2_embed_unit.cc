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

using gpt2_internal::AllNull;
using gpt2_internal::BatchShape;
using gpt2_internal::CheckParamCount;
using gpt2_internal::CopyOf;
using gpt2_internal::OnlyInput;
using gpt2_internal::Spec;
using gpt2_internal::WeightInputsAs;

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

class NothingSaved : public SavedActivations {
 public:
  int64_t bytes() const override { return 0; }
};

// What each unit's BackwardInput keeps for its BackwardWeight (kActivations).
struct EmbedWeightInputs : public SavedActivations {
  Buffer dout;  // (B,T,C) or {N/tp, C}: the caller's output grad need not outlive BackwardInput
  int64_t bytes() const override { return dout.bytes(); }
};

}  // namespace

// ---------------------------------------------------------------------------
// embed

Gpt2EmbedUnit::Gpt2EmbedUnit(const Gpt2Config& config)
    : NamedUnit("embed"),
      embedding_(config.vocab_size, config.seq_len, config.n_embd),
      vp_embedding_(name_, config.vocab_size, config.padded_vocab_size(), config.seq_len, config.n_embd),
      c_(config.n_embd),
      v_(config.vocab_size),
      vp_(config.padded_vocab_size()) {
  // Hugging Face initialises both embeddings with normal(0, 0.02). wte's
  // rows are split over tp (padded to Vp rows, which are zero).
  ParamSpec wte = Spec("wte.weight", {vp_, c_}, InitKind::kNormal);
  if (vp_ != v_) wte.logical_shape = {v_, c_};
  wte.partition = Partition::Split(0);
  wte.pads_split_dim = true;  // the vocabulary is padded to vocab_multiple, the tp size
  params_.push_back(std::move(wte));
  params_.push_back(Spec("wpe.weight", {config.seq_len, config.n_embd}, InitKind::kNormal));
}

absl::StatusOr<std::vector<int64_t>> Gpt2EmbedUnit::OutputShape(const UnitContext& uctx, int64_t b, int64_t t) const {
  if (!vocab_parallel::SequenceParallel(uctx.parallel)) return std::vector<int64_t>{b, t, c_};
  ASSIGN_OR_RETURN(const int64_t rows, vocab_parallel::LocalRows(name_, b * t, uctx.parallel));
  return std::vector<int64_t>{rows, c_};
}

absl::Status Gpt2EmbedUnit::Forward(const UnitContext& uctx, absl::Span<const TensorView> params,
                                    const Batch& batch, absl::Span<const TensorView> /*in*/, UnitOutput* out,
                                    std::unique_ptr<SavedActivations>* saved) const {
  const ComputeContext& ctx = uctx.compute;
  RETURN_IF_ERROR(CheckParamCount(name_, params, 2, "parameter"));
  ASSIGN_OR_RETURN(auto bt, BatchShape(ctx, batch, /*need_targets=*/false));
  if (VocabParallel(uctx.parallel)) {
    ASSIGN_OR_RETURN(const std::vector<int64_t> shape, OutputShape(uctx, bt.first, bt.second));
    ASSIGN_OR_RETURN(Buffer y, AllocateOnDevice(ctx, MemoryCategory::kActivations, ctx.compute_dtype, Numel(shape)));
    RETURN_IF_ERROR(vp_embedding_.Forward(uctx, params[0], params[1], *batch.Find("inputs"), View(y, shape)));
    out->activations.Add(std::move(y), shape);
    *saved = std::make_unique<NothingSaved>();
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(Buffer y, AllocateOutputOnDevice(ctx, MemoryCategory::kActivations, ctx.compute_dtype,
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
  if (VocabParallel(uctx.parallel)) return vp_embedding_.Backward(uctx, inputs, dy, grads[0], grads[1]);
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
  ASSIGN_OR_RETURN(const std::vector<int64_t> shape, OutputShape(uctx, bt.first, bt.second));
  RETURN_IF_ERROR(CheckTensor(dy, "embedding output grad", ctx.compute_dtype, shape, ctx.kernels.device));
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
  ASSIGN_OR_RETURN(const std::vector<int64_t> shape, OutputShape(uctx, bt.first, bt.second));
  const int64_t rows = Numel(shape) / c_;
  if (w->dout.numel() != rows * c_) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": batch has ", rows, " rows but the weight inputs have ", w->dout.numel() / c_));
  }
  if (AllNull({&grads[0], &grads[1]})) return absl::OkStatus();
  if (VocabParallel(uctx.parallel)) {
    return vp_embedding_.Backward(uctx, *batch.Find("inputs"), View(w->dout, shape), grads[0], grads[1]);
  }
  return embedding_.Backward(uctx.compute, *batch.Find("inputs"), View(w->dout, {bt.first, bt.second, c_}), grads[0],
                             grads[1]);
}

// Forward keeps nothing (NothingSaved); its output is (B, T, C).
int64_t Gpt2EmbedUnit::EstimateSavedActivationBytes(int64_t, int64_t, DType) const { return 0; }
int64_t Gpt2EmbedUnit::EstimateOutputActivationBytes(int64_t batch, int64_t seq, DType compute) const {
  return batch * seq * c_ * static_cast<int64_t>(DTypeSize(compute));
}

}  // namespace zeroshard
