// Writing a whole checkpoint step from one process (offline tools: `ckpt
// reshard`, `ckpt import`; tests). The caller fills in everything of the
// manifest except `files`: format_version, step, topology (dp, alignment),
// kinds and units. The writer makes one shard file per dp rank, taking each
// unit's values from `read_flat` (elements [begin, begin + count) of the
// unit's flat buffer of kind `kinds[k]`, with begin + count <= numel;
// padding is written as zeros; the output has one pipeline stage: pp 1,
// every unit at stage 0), then writes the manifest and commits the
// step under `root` exactly as SaveCheckpoint does (temporary directory,
// rename, `latest`). Memory: one rank's shard file at a time.
#ifndef ZEROSHARD_CHECKPOINT_OFFLINE_WRITER_H_
#define ZEROSHARD_CHECKPOINT_OFFLINE_WRITER_H_

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/checkpoint.pb.h"

namespace zeroshard {

using FlatRangeSource = absl::FunctionRef<absl::Status(int unit, int kind, int64_t begin, int64_t count, float* out)>;

// Returns the committed step directory's path.
absl::StatusOr<std::string> WriteCheckpointOffline(const std::string& root, CheckpointManifest manifest,
                                                   FlatRangeSource read_flat);

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_OFFLINE_WRITER_H_
