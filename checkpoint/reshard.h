// `zeroshard ckpt reshard`: rewrite a checkpoint for another dp size,
// offline. The result is what a job at the new dp would have saved from the
// same state: the same manifest (step, config, scaler, data position) with
// the new topology and files.
#ifndef ZEROSHARD_CHECKPOINT_RESHARD_H_
#define ZEROSHARD_CHECKPOINT_RESHARD_H_

#include <string>

#include "absl/status/statusor.h"
#include "checkpoint/checkpoint_reader.h"

namespace zeroshard {

// Writes step_<N> under out_root (committed with `latest`, like a save) and
// returns its path. kInvalidArgument for dp < 1; kUnimplemented, naming the
// size, for a checkpoint saved at tp > 1 (nothing is written). Every value read is
// checksum-verified; out_root may be the source root (the step is replaced
// only after everything was read).
absl::StatusOr<std::string> ReshardCheckpoint(const CheckpointReader& reader, const std::string& out_root, int dp);

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_RESHARD_H_
