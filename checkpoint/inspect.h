// `zeroshard ckpt inspect`: a readable summary of a checkpoint from its
// manifest alone (the shard files are not read).
#ifndef ZEROSHARD_CHECKPOINT_INSPECT_H_
#define ZEROSHARD_CHECKPOINT_INSPECT_H_

#include <string>

#include "checkpoint/checkpoint_reader.h"

namespace zeroshard {

// Step, topology, the model (registry name and run-config message), units with their parameter counts and shard sizes,
// parameter count, bytes by kind (stored, padding included) and by file
// (each with its (pp, dp, tp) coordinates), dtypes, optimizer, loss scaler,
// seed and data position. At tp > 1 also each split parameter's whole
// shape, per-rank slice and partition (vocabulary padding named).
std::string InspectCheckpoint(const CheckpointReader& reader);

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_INSPECT_H_
