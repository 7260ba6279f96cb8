#include "sharding/quantized_shard.h"

#include <algorithm>

#include "core/status_macros.h"

namespace zeroshard {

std::vector<int64_t> QuantizationRuns(const FlatParamLayout& layout, int rank) {
  std::vector<int64_t> runs;
  int64_t covered = 0;
  for (const ShardSegment& seg : layout.SegmentsForRank(rank)) {
    // Parameters are laid end to end, so segments are contiguous; a gap
    // would be padding, which only follows the last parameter.
    if (seg.offset_in_shard > covered) runs.push_back(seg.offset_in_shard - covered);
    runs.push_back(seg.length);
    covered = seg.offset_in_shard + seg.length;
  }
  if (layout.shard_numel() > covered) runs.push_back(layout.shard_numel() - covered);
  return runs;
}

int64_t PackedShardBytes(const std::vector<int64_t>& runs, int64_t block) {
  int64_t bytes = 0;
  for (int64_t n : runs) bytes += kernels::Int8PackedBytes(n, block);
  return bytes;
}

int64_t MaxPackedShardBytes(const FlatParamLayout& layout, int64_t block) {
  int64_t bytes = 0;
  for (int r = 0; r < layout.dp(); ++r) bytes = std::max(bytes, PackedShardBytes(QuantizationRuns(layout, r), block));
  return bytes;
}

int64_t MaxPackedBucketPartBytes(const std::vector<const FlatParamLayout*>& layouts, int64_t block) {
  int64_t largest = 0;
  const int dp = layouts.empty() ? 0 : layouts.front()->dp();
  for (int d = 0; d < dp; ++d) {
    int64_t bytes = 0;
    for (const FlatParamLayout* l : layouts) bytes += PackedShardBytes(QuantizationRuns(*l, d), block);
    largest = std::max(largest, bytes);
  }
  return largest;
}

absl::Status QuantizeShard(const kernels::KernelContext& ctx, void* packed, const void* in, DType in_dtype,
                           const std::vector<int64_t>& runs, int64_t block, kernels::NonFiniteInput non_finite,
                           float* residual) {
  char* dst = static_cast<char*>(packed);
  const char* src = static_cast<const char*>(in);
  const size_t size = DTypeSize(in_dtype);
  for (int64_t n : runs) {
    RETURN_IF_ERROR(kernels::QuantizeInt8Blocks(ctx, dst, src, in_dtype, n, block, non_finite, residual));
    dst += kernels::Int8PackedBytes(n, block);
    src += n * size;
    if (residual != nullptr) residual += n;
  }
  return absl::OkStatus();
}

absl::Status DequantizeShard(const kernels::KernelContext& ctx, void* out, DType out_dtype, const void* packed,
                             const std::vector<int64_t>& runs, int64_t block) {
  char* dst = static_cast<char*>(out);
  const char* src = static_cast<const char*>(packed);
  const size_t size = DTypeSize(out_dtype);
  for (int64_t n : runs) {
    RETURN_IF_ERROR(kernels::DequantizeInt8Blocks(ctx, dst, out_dtype, src, n, block));
    src += kernels::Int8PackedBytes(n, block);
    dst += n * size;
  }
  return absl::OkStatus();
}

absl::Status DequantizeShardAccumulate(const kernels::KernelContext& ctx, float* acc, const void* packed,
                                       const std::vector<int64_t>& runs, int64_t block) {
  const char* src = static_cast<const char*>(packed);
  for (int64_t n : runs) {
    RETURN_IF_ERROR(kernels::DequantizeInt8BlocksAccumulate(ctx, acc, src, n, block));
    src += kernels::Int8PackedBytes(n, block);
    acc += n;
  }
  return absl::OkStatus();
}

}  // namespace zeroshard
