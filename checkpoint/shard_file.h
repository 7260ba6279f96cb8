// Writing one rank's shard file: for each unit with parameters, in unit
// order, one F32 tensor "unit.<u>.<kind>" of the unit's shard size S per kind,
// in the manifest's kind order. The returned CheckpointFile record (sizes,
// offsets, checksums) is what the manifest lists for the file.
#ifndef ZEROSHARD_CHECKPOINT_SHARD_FILE_H_
#define ZEROSHARD_CHECKPOINT_SHARD_FILE_H_

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "proto/checkpoint.pb.h"
#include "sharding/flat_param_layout.h"

namespace zeroshard {

// `data(unit, kind_index)` returns the unit's S f32 values of that kind on
// this rank (called for units with numel > 0 only, in the file's order, each
// when the write reaches it; valid until the next call, so a caller may stage
// one (unit, kind) at a time), or the error that stops the write. Writes <dir>/ShardFileName(pp, dp, tp) and fsyncs
// it; the record carries those coordinates.
absl::StatusOr<CheckpointFile> WriteShardFile(const std::string& dir, int pp_rank, int dp_rank, int tp_rank,
                                              int64_t step,
                                              const std::vector<FlatParamLayout>& layouts,
                                              const std::vector<std::string>& kinds,
                                              absl::FunctionRef<absl::StatusOr<const float*>(int unit, int kind)> data);

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_SHARD_FILE_H_
