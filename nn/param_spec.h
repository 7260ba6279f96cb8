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
  // multiplier; unset, the config's no-decay name patterns choose 0 or 1.
  std::optional<float> weight_decay_mult;
  // The learning rate is the schedule's times this.
  float lr_mult = 1.0f;

  int64_t numel() const;  // of the global shape
};

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

}  // namespace zeroshard

#endif  // ZEROSHARD_NN_PARAM_SPEC_H_
