#include "sharding/flat_param_layout.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeroshard {

absl::StatusOr<FlatParamLayout> FlatParamLayout::Create(std::string unit_name, int unit_index,
                                                        std::vector<FlatParamDecl> params, int dp,
                                                        int64_t alignment) {
  if (dp < 1) return absl::InvalidArgumentError(absl::StrCat("dp size is ", dp, ", expected >= 1"));
  if (alignment < 1) {
    return absl::InvalidArgumentError(absl::StrCat("shard alignment is ", alignment, ", expected >= 1"));
  }
  FlatParamLayout layout;
  layout.unit_name_ = std::move(unit_name);
  layout.unit_index_ = unit_index;
  layout.dp_ = dp;
  layout.alignment_ = alignment;
  std::set<std::string> seen;
  int64_t offset = 0;
  for (FlatParamDecl& decl : params) {
    if (decl.name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unit '", layout.unit_name_, "' declares a parameter with an empty name"));
    }
    if (!seen.insert(decl.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("unit '", layout.unit_name_, "' declares parameter '", decl.name, "' twice"));
    }
    int64_t numel = 1;
    for (int64_t d : decl.shape) {
      if (d < 0) {
        return absl::InvalidArgumentError(absl::StrCat("parameter '", decl.name, "' has dimension ", d,
                                                       ", expected >= 0"));
      }
      numel *= d;
    }
    FlatParamInfo info;
    info.name = std::move(decl.name);
    info.shape = std::move(decl.shape);
    info.offset = offset;
    info.numel = numel;
    offset += numel;
    layout.params_.push_back(std::move(info));
  }
  layout.numel_ = offset;
  // Smallest S, a multiple of alignment, with dp * S >= N.
  const int64_t per_rank = (offset + dp - 1) / dp;
  layout.shard_numel_ = (per_rank + alignment - 1) / alignment * alignment;
  return layout;
}

std::vector<ShardSegment> FlatParamLayout::SegmentsForRank(int rank) const {
  return SegmentsInRange(ShardBegin(rank), shard_numel_);
}

std::vector<ShardSegment> FlatParamLayout::SegmentsInRange(int64_t begin, int64_t length) const {
  std::vector<ShardSegment> segments;
  const int64_t end = begin + length;
  for (int i = 0; i < static_cast<int>(params_.size()); ++i) {
    const FlatParamInfo& p = params_[i];
    const int64_t lo = std::max(begin, p.offset);
    const int64_t hi = std::min(end, p.offset + p.numel);
    if (lo >= hi) continue;
    ShardSegment seg;
    seg.param_index = i;
    seg.offset_in_param = lo - p.offset;
    seg.offset_in_shard = lo - begin;
    seg.length = hi - lo;
    segments.push_back(seg);
  }
  return segments;
}

absl::StatusOr<int> FlatParamLayout::FindParam(absl::string_view name) const {
  for (int i = 0; i < static_cast<int>(params_.size()); ++i) {
    if (params_[i].name == name) return i;
  }
  return absl::NotFoundError(absl::StrCat("unit '", unit_name_, "' has no parameter '", name, "'"));
}

std::string FlatParamLayout::DebugString() const {
  std::string out = absl::StrCat("unit ", unit_index_, " '", unit_name_, "' dp=", dp_, " align=", alignment_,
                                 " N=", numel_, " S=", shard_numel_, " {");
  for (const FlatParamInfo& p : params_) {
    absl::StrAppend(&out, " ", p.name, "[", absl::StrJoin(p.shape, ","), "]@", p.offset);
  }
  absl::StrAppend(&out, " }");
  return out;
}

}  // namespace zeroshard
