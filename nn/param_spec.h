// ParamSpec: one parameter as a unit declares it, with how it is split over
// the tensor-parallel group, whether it trains, and its optimizer group
// (docs/model.md).
#ifndef ZEROSHARD_NN_PARAM_SPEC_H_
#define ZEROSHARD_NN_PARAM_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zeroshard {

enum class InitKind { kNormal, kZeros, kOnes };

// How a parameter's global tensor is divided over the tp ranks.
// Replicated: every rank holds all of it. Split: dimension `dim` is cut into
// tp equal slices, rank r holding slice r; with `blocks` = k > 1 the
// dimension is first k equal blocks (a fused q|k|v weight: k = 3) and each
// block is cut, so rank r holds slice r of every block (whole heads).
struct Partition {
  enum class Kind { kReplicated, kSplit };
  Kind kind = Kind::kReplicated;
  int dim = 0;
  int blocks = 1;

  static Partition Replicated() { return Partition(); }
  static Partition Split(int dim, int blocks = 1) { return Partition{Kind::kSplit, dim, blocks}; }
  bool replicated() const { return kind == Kind::kReplicated; }
  bool operator==(const Partition& o) const {
    return kind == o.kind && (kind == Kind::kReplicated || (dim == o.dim && blocks == o.blocks));
  }
  // "replicated", "split(dim=1, blocks=3)".
  std::string DebugString() const;
};

struct ParamSpec {
  std::string name;            // Hugging Face name, e.g. "h.0.attn.c_attn.weight"
  std::vector<int64_t> shape;  // GLOBAL shape, e.g. {C, 3C} (HF Conv1D layout: y = x·W + b)
  InitKind init = InitKind::kNormal;
  float init_std = 0.02f;  // for kNormal; residual projections 0.02/sqrt(2*n_layer)
  Partition partition;
  // false: frozen — no gradient, no optimizer state, no reduction; training
  // leaves its values bitwise unchanged.
  bool trainable = true;
  // Optimizer group. Weight decay is optimizer.weight_decay times this
  // multiplier; unset, it is 0 or 1 as WeightDecayPolicy decides
  // (sharding/weight_decay_policy.h): the config's no-decay name patterns
  // when it lists any, otherwise no_weight_decay below.
  std::optional<float> weight_decay_mult;
  // The learning rate is the schedule's times this.
  float lr_mult = 1.0f;
  // Padding. Empty: none, the tensor users see is `shape`. Otherwise the
  // shape users and Hugging Face files see (same rank, each dimension in
  // [1, shape's]): the elements of `shape` beyond it in any dimension are
  // padding (GPT-2's wte.weight [Vp, C] with logical [V, C]: the trailing
  // Vp - V rows, so the vocabulary splits evenly over tp). Padding is zero
  // at initialisation and its gradient stays exactly zero, so it stays
  // zero under AdamW and SGD (docs/model.md, "Tensor parallelism").
  std::vector<int64_t> logical_shape;
  // A split parameter whose split dimension the model pads with zeros to a
  // multiple of blocks × tp (GPT-2's vocabulary): tools that re-cut a
  // checkpoint for another tp pad it the same way. Other split parameters
  // must divide (Model::Validate).
  bool pads_split_dim = false;
  // The model's default: this parameter gets no weight decay (biases and
  // normalisation weights, by the usual rule), unless the config lists its
  // own engine.optimizer.no_decay_patterns.
  bool no_weight_decay = false;

  int64_t numel() const;  // of the global shape
  // logical_shape, or shape when there is no padding.
  const std::vector<int64_t>& logical() const { return logical_shape.empty() ? shape : logical_shape; }
  int64_t logical_numel() const;  // of logical()
  bool padded() const { return logical_numel() != numel(); }
};

// OK when logical_shape is empty, or has shape's rank with every dimension
// in [1, shape's]; kInvalidArgument naming the parameter otherwise.
absl::Status ValidateLogicalShape(const ParamSpec& spec);

// The element of the logical tensor that global (row-major) element
// `global_index` is, or -1 when it is padding. The identity without
// padding, and for real elements when only dimension 0 is padded.
// Precondition: ValidateLogicalShape is OK, 0 <= global_index < numel().
int64_t LogicalIndex(const ParamSpec& spec, int64_t global_index);
inline bool IsPadding(const ParamSpec& spec, int64_t global_index) { return LogicalIndex(spec, global_index) < 0; }

// The shape one tp rank holds. kInvalidArgument naming the parameter when
// the split dimension does not exist or (blocks x tp_size) does not divide
// it.
absl::StatusOr<std::vector<int64_t>> LocalShape(const ParamSpec& spec, int tp_size);

// A run of consecutive local elements and where they start in the global
// tensor (both row-major flat indices).
struct GlobalRun {
  int64_t local_begin = 0;
  int64_t global_begin = 0;
  int64_t length = 0;
  bool operator==(const GlobalRun& o) const {
    return local_begin == o.local_begin && global_begin == o.global_begin && length == o.length;
  }
};

// Rank tp_rank's local tensor as runs of the global one, in local order,
// covering [0, local numel). One run when replicated or tp_size == 1.
// Preconditions: LocalShape(spec, tp_size) is OK, 0 <= tp_rank < tp_size.
std::vector<GlobalRun> LocalToGlobalRuns(const ParamSpec& spec, int tp_rank, int tp_size);

// The logical tensor as runs of the global one: `local_begin` is a flat
// index of logical(), `global_begin` of shape. Every real element is in
// exactly one run, no padding is; in logical order. One run
// {0, 0, logical_numel()} without padding or when only dimension 0 is
// padded. What a checkpoint or GatherParam copies to drop the padding.
// Precondition: ValidateLogicalShape is OK.
std::vector<GlobalRun> LogicalToGlobalRuns(const ParamSpec& spec);

// Copies between a parameter's three forms (f32 values): rank tp_rank's
// slice (LocalShape's numel) into its place in the whole tensor (numel());
// the whole tensor to the logical one users see (padding dropped); the
// logical tensor to the whole one (padding zero). Preconditions as for the
// runs they follow.
void PlaceLocalSlice(const ParamSpec& spec, int tp_rank, int tp_size, const float* local, float* global);
std::vector<float> DropPadding(const ParamSpec& spec, const float* global);
std::vector<float> AddPadding(const ParamSpec& spec, const float* logical);

}  // namespace zeroshard

#endif  // ZEROSHARD_NN_PARAM_SPEC_H_
