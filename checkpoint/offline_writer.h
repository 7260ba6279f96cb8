// Writing a whole checkpoint step from one process (offline tools: `ckpt
// reshard`, `ckpt import`; tests), at any (dp, tp, pp) layout. The caller
// gives the manifest of that layout without files (ManifestAtLayout,
// checkpoint/checkpoint_layout.h: topology, kinds, units with their slice
// shapes, partitions and stages, and everything else to carry) and each
// parameter's values as the logical tensor users see (`source`: unit,
// parameter index, kind index -> logical_numel values, or an empty vector
// for zeros). The writer makes one shard file per (pp, dp, tp) rank —
// each tp rank's slices laid into its units' flat buffers, each dp rank's
// shard of them, vocabulary and flat-buffer padding as zeros — then writes
// the manifest and commits the step under `root` as SaveCheckpoint does
// (temporary directory, rename, `latest`; the temporary directory is
// removed on any failure). Memory: one (stage, tp rank)'s flat buffers of
// every kind at a time.
#ifndef ZEROSHARD_CHECKPOINT_OFFLINE_WRITER_H_
#define ZEROSHARD_CHECKPOINT_OFFLINE_WRITER_H_

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "proto/checkpoint.pb.h"

namespace zeroshard {

using LogicalTensorSource = absl::FunctionRef<absl::StatusOr<std::vector<float>>(int unit, int param, int kind)>;

// Returns the committed step directory's path.
absl::StatusOr<std::string> WriteCheckpointOffline(const std::string& root, CheckpointManifest manifest,
                                                   LogicalTensorSource source);

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_OFFLINE_WRITER_H_
