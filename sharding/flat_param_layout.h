// FlatParamLayout: where each parameter of one unit lives in the unit's flat
// buffer, and which slice of that buffer each data-parallel rank owns.
//
// A unit's parameters are laid end to end in declaration order (numel N),
// then padded to P = dp * S, where the shard size S is the smallest multiple
// of `alignment` elements with dp * S >= N. Rank r owns [r*S, (r+1)*S).
// A parameter may straddle shard borders; SegmentsForRank() cuts the
// parameters into the pieces one rank owns. Padding elements belong to no
// parameter: they stay zero in params, grads and optimizer state.
//
// The layout is pure metadata (no buffers), immutable after Create, and
// therefore thread-safe. The same metadata drives consolidation and
// resharding of checkpoints.
#ifndef ZEROSHARD_SHARDING_FLAT_PARAM_LAYOUT_H_
#define ZEROSHARD_SHARDING_FLAT_PARAM_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zeroshard {

// 16 elements = 64 bytes of f32 (32 bytes of bf16): every shard starts on a
// cache line / vector boundary whatever the dtype.
inline constexpr int64_t kDefaultShardAlignment = 16;

// A parameter as a unit declares it.
struct FlatParamDecl {
  std::string name;  // globally unique, e.g. "blocks.0.fc.weight"
  std::vector<int64_t> shape;
};

// A parameter's place in the unit's flat buffer.
struct FlatParamInfo {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // first element in the flat buffer
  int64_t numel = 0;
};

// A run of consecutive elements of one parameter owned by one rank.
struct ShardSegment {
  int param_index = 0;         // into FlatParamLayout::params()
  int64_t offset_in_param = 0;  // first element within the parameter
  int64_t offset_in_shard = 0;  // first element within the rank's shard
  int64_t length = 0;

  bool operator==(const ShardSegment& o) const {
    return param_index == o.param_index && offset_in_param == o.offset_in_param &&
           offset_in_shard == o.offset_in_shard && length == o.length;
  }
};

class FlatParamLayout {
 public:
  FlatParamLayout() = default;

  // kInvalidArgument for dp < 1, alignment < 1, a dimension < 0, an empty
  // or duplicate name. A unit may declare no parameters (N = P = S = 0).
  static absl::StatusOr<FlatParamLayout> Create(std::string unit_name, int unit_index,
                                                std::vector<FlatParamDecl> params, int dp,
                                                int64_t alignment = kDefaultShardAlignment);

  const std::string& unit_name() const { return unit_name_; }
  int unit_index() const { return unit_index_; }
  int dp() const { return dp_; }
  int64_t alignment() const { return alignment_; }
  int64_t numel() const { return numel_; }                // N, without padding
  int64_t shard_numel() const { return shard_numel_; }    // S
  int64_t padded_numel() const { return shard_numel_ * dp_; }  // P
  int64_t padding() const { return padded_numel() - numel_; }
  const std::vector<FlatParamInfo>& params() const { return params_; }

  // First element of `rank`'s shard in the flat buffer. Precondition: 0 <= rank < dp.
  int64_t ShardBegin(int rank) const { return rank * shard_numel_; }

  // The pieces of parameters in rank's shard, in increasing flat offset.
  // Padding is not covered by any segment. Precondition: 0 <= rank < dp.
  std::vector<ShardSegment> SegmentsForRank(int rank) const;

  // The same for any region [begin, begin + length) of the flat buffer;
  // offset_in_shard is then relative to `begin`. SegmentsForRank(r) is
  // SegmentsInRange(ShardBegin(r), shard_numel()).
  std::vector<ShardSegment> SegmentsInRange(int64_t begin, int64_t length) const;

  // Index into params() of `name`; kNotFound naming the unit otherwise.
  absl::StatusOr<int> FindParam(absl::string_view name) const;

  // A stable text of everything above, for cross-rank fingerprints.
  std::string DebugString() const;

 private:
  std::string unit_name_;
  int unit_index_ = 0;
  int dp_ = 1;
  int64_t alignment_ = kDefaultShardAlignment;
  int64_t numel_ = 0;
  int64_t shard_numel_ = 0;
  std::vector<FlatParamInfo> params_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_SHARDING_FLAT_PARAM_LAYOUT_H_
