// `zeroshard ckpt reshard`: rewrite a checkpoint for another (dp, tp, pp)
// layout, offline, optimizer state included. The result is what a job at
// the new layout would have saved from the same state: the same manifest
// (step, config, scaler, RNG, data position) with the new topology, slice
// shapes, stages and files; its consolidated file equals the source's.
#ifndef ZEROSHARD_CHECKPOINT_RESHARD_H_
#define ZEROSHARD_CHECKPOINT_RESHARD_H_

#include <string>

#include "absl/status/statusor.h"
#include "checkpoint/checkpoint_reader.h"
#include "comm/process_grid.h"

namespace zeroshard {

// Writes step_<N> under out_root (committed with `latest`, like a save) and
// returns its path. Errors as ManifestAtLayout's (checkpoint/
// checkpoint_layout.h: a size < 1, a split that does not divide, tp > 1
// from a checkpoint without partitions); nothing is then written. Every
// value read is checksum-verified; out_root may be the source root (the
// step is replaced only after everything was read).
absl::StatusOr<std::string> ReshardCheckpoint(const CheckpointReader& reader, const std::string& out_root,
                                              const GridShape& target);

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_RESHARD_H_
