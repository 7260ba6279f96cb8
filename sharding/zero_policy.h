// ZeroPolicy: every answer that depends on the ZeRO stage, in one place
// (docs/sharding.md). The program compiler, the unit shards, the gradient
// reducer, the optimizer phase and evaluation ask it what persists, what is
// gathered when, how gradients are reduced and what is allocated; nothing
// else reads the stage number (checkpoints and metrics record stage() as
// data).
//
//   stage | params at rest | grads at rest     | master, optimizer state
//   0     | full           | full              | full
//   1     | full           | full              | shard
//   2     | full           | reduced f32 shard | shard
//   3     | shard          | reduced f32 shard | shard
#ifndef ZEROSHARD_SHARDING_ZERO_POLICY_H_
#define ZEROSHARD_SHARDING_ZERO_POLICY_H_

#include "absl/status/statusor.h"

namespace zeroshard {

class ZeroPolicy {
 public:
  // Stage 0 (plain data parallelism).
  ZeroPolicy() = default;
  // kInvalidArgument naming the stage unless it is 0, 1, 2 or 3.
  static absl::StatusOr<ZeroPolicy> ForStage(int stage);

  // The configured stage, for records (checkpoint topology, metrics, traces).
  int stage() const { return stage_; }

  // What persists between steps.
  // Parameters at rest are this rank's shard; compute gathers them (stage 3).
  bool shards_params() const { return stage_ == 3; }
  // The master copy and the optimizer state cover this rank's shard only
  // (stages 1-3); stage 0 keeps the whole padded buffer on every rank.
  bool shards_master() const { return stage_ >= 1; }
  // The reduced f32 gradient shard persists and the full compute-dtype
  // gradient buffer lives only from a unit's first backward to its
  // reduction (stages 2-3); stages 0-1 keep full gradients and a per-step
  // shard.
  bool shards_grads() const { return stage_ >= 2; }

  // What is gathered when.
  // Units are all-gathered before compute and released after (stage 3).
  bool gathers_params() const { return shards_params(); }
  // After the update, the compute parameters are all-gathered from every
  // rank's updated shard (stages 1-2). Stage 0 updates the whole buffer on
  // every rank; stage 3 rounds into its own shard.
  bool publishes_by_all_gather() const { return stage_ == 1 || stage_ == 2; }

  // What is reduced and how.
  // Every rank updates the whole buffer, so the reduce-scatter's shards are
  // all-gathered back (the second half of an all-reduce) before the update
  // (stage 0).
  bool all_gathers_reduced_grads() const { return stage_ == 0; }
  // Data parallelism at stage 1 reduces every bucket after the micro-batch's
  // backward rather than overlapped with it; pipeline stages overlap at
  // every ZeRO stage.
  bool reduces_after_backward(bool pipelined) const { return stage_ == 1 && !pipelined; }

  // What is allocated.
  // The f32 gradient shard is allocated at the start of each step and freed
  // at its end (stages 0-1).
  bool grad_shard_per_step() const { return !shards_grads(); }
  // Full gradients persist and are zeroed at the start of each step (stages
  // 0-1); otherwise the grad shard is zeroed.
  bool zeroes_full_grads() const { return !shards_grads(); }
  // The all-gathered f32 gradients need a full buffer of their own when the
  // compute dtype is narrower than f32 (stage 0).
  bool needs_full_f32_grads(bool low_precision_compute) const {
    return all_gathers_reduced_grads() && low_precision_compute;
  }

  bool operator==(const ZeroPolicy& o) const { return stage_ == o.stage_; }
  bool operator!=(const ZeroPolicy& o) const { return stage_ != o.stage_; }

 private:
  explicit ZeroPolicy(int stage) : stage_(stage) {}
  int stage_ = 0;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_SHARDING_ZERO_POLICY_H_
