// A checkpoint's parameters at another grid layout (docs/checkpoint_format.md,
// "Resharding"). Every parameter is described by its whole tensor (global
// shape, tp partition, logical shape: nn/param_spec.h); a layout (dp, tp,
// pp) fixes each tp rank's slice shape, each unit's flat buffer and shard
// size, and the pipeline stage that holds each unit. The offline tools
// (`ckpt reshard`, `ckpt import`) write any layout from these manifests;
// the engine reads any layout into its own (checkpoint/engine_checkpoint.h).
#ifndef ZEROSHARD_CHECKPOINT_CHECKPOINT_LAYOUT_H_
#define ZEROSHARD_CHECKPOINT_CHECKPOINT_LAYOUT_H_

#include "absl/status/statusor.h"
#include "comm/process_grid.h"
#include "nn/param_spec.h"
#include "proto/checkpoint.pb.h"

namespace zeroshard {

// The whole tensor a parameter has at `tp`: the split dimension of a
// parameter that pads it (pads_split_dim: GPT-2's vocabulary) is its
// logical size rounded up to a multiple of blocks × tp, zero padding, as
// the trainer pads it; everything else keeps its logical size.
ParamSpec WholeSpecAtTp(const ParamSpec& spec, int tp);

// Writes `spec` (whole shape, partition, logical shape) into `param`, whose
// `shape` is already the slice one tp rank holds: global_shape and the
// split of a split parameter, logical_shape when padded.
void RecordParamSpec(const ParamSpec& spec, CheckpointParam* param);

// `source` (any layout, format 1 or 2) as the manifest of `target`: every
// parameter's slice shape, offset and numel at target.tp, every unit's
// numel and shard size at target.dp, the units' stages at target.pp (the
// source's when pp is unchanged; otherwise PartitionByCost over the
// parameters each unit reads, as the engine partitions), topology; files
// cleared. kFailedPrecondition when target.tp > 1 and the source records no
// partitions (format 1); kInvalidArgument naming the parameter when a
// split does not divide at target.tp or pp exceeds the units.
absl::StatusOr<CheckpointManifest> ManifestAtLayout(const CheckpointManifest& source, const GridShape& target);

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_CHECKPOINT_LAYOUT_H_
