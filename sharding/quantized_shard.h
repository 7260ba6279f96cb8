// The int8 form of one rank's shard of a unit, as quantized collectives move
// it (docs/parallelism.md, "int8 communication").
//
// The shard is cut into runs where parameters begin and end (the padding
// after the last parameter is a run of its own), and each run is quantized
// blockwise on its own (kernels/quantize.h): blocks restart at every run, so
// no block mixes two parameters' magnitudes — a LayerNorm's 1.0s would
// otherwise set the scale of the 0.02-sized weights next to it. The packed
// shard is the runs' packed forms end to end.
//
// A collective needs one byte count for every rank's part, but the runs
// differ from rank to rank: parts are padded to the largest rank's
// (MaxPackedShardBytes).
#ifndef ZEROSHARD_SHARDING_QUANTIZED_SHARD_H_
#define ZEROSHARD_SHARDING_QUANTIZED_SHARD_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/context.h"
#include "kernels/quantize.h"
#include "sharding/flat_param_layout.h"

namespace zeroshard {

// Lengths of the runs of rank `rank`'s shard, in order; they sum to the
// shard's numel (empty for an empty shard).
std::vector<int64_t> QuantizationRuns(const FlatParamLayout& layout, int rank);

// Bytes of the packed runs.
int64_t PackedShardBytes(const std::vector<int64_t>& runs, int64_t block);
// The largest PackedShardBytes over the layout's ranks.
int64_t MaxPackedShardBytes(const FlatParamLayout& layout, int64_t block);
// A reduction bucket's part for one destination rank d: the packed runs of
// shard d of every unit in `layouts`, end to end; the largest over d (the
// all-to-all's count). The layouts must have the same dp.
int64_t MaxPackedBucketPartBytes(const std::vector<const FlatParamLayout*>& layouts, int64_t block);

// packed WRITTEN from `in` (the shard, in_dtype), run by run (see
// kernels::QuantizeInt8Blocks; residual, when not null, is the shard's).
absl::Status QuantizeShard(const kernels::KernelContext& ctx, void* packed, const void* in, DType in_dtype,
                           const std::vector<int64_t>& runs, int64_t block, kernels::NonFiniteInput non_finite,
                           float* residual = nullptr);
// out (the shard, out_dtype) WRITTEN from packed.
absl::Status DequantizeShard(const kernels::KernelContext& ctx, void* out, DType out_dtype, const void* packed,
                             const std::vector<int64_t>& runs, int64_t block);
// acc (the shard, f32) += the dequantized values.
absl::Status DequantizeShardAccumulate(const kernels::KernelContext& ctx, float* acc, const void* packed,
                                       const std::vector<int64_t>& runs, int64_t block);

}  // namespace zeroshard

#endif  // ZEROSHARD_SHARDING_QUANTIZED_SHARD_H_
