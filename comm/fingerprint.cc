#include "comm/fingerprint.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeroshard {
namespace {

bool IsReduction(CommOp op) { return op == CommOp::kAllReduce || op == CommOp::kReduceScatter; }

}  // namespace

bool CollectiveFingerprint::operator==(const CollectiveFingerprint& o) const {
  return seq == o.seq && op == o.op && count == o.count && dtype == o.dtype && root == o.root &&
         reduce_op == o.reduce_op;
}

std::array<int64_t, CollectiveFingerprint::kWords> CollectiveFingerprint::Encode() const {
  return {seq, static_cast<int64_t>(op), count, static_cast<int64_t>(dtype), root, static_cast<int64_t>(reduce_op)};
}

CollectiveFingerprint CollectiveFingerprint::Decode(const int64_t* words) {
  CollectiveFingerprint fp;
  fp.seq = words[0];
  fp.op = static_cast<CommOp>(words[1]);
  fp.count = words[2];
  fp.dtype = static_cast<DType>(words[3]);
  fp.root = static_cast<int>(words[4]);
  fp.reduce_op = static_cast<ReduceOp>(words[5]);
  return fp;
}

std::string DescribeCollective(const CollectiveFingerprint& fp) {
  if (fp.op == CommOp::kBarrier || fp.op == CommOp::kSplit) return absl::StrCat(CommOpName(fp.op), "()");
  std::string s = absl::StrCat(CommOpName(fp.op), "(", DTypeName(fp.dtype), ", ", fp.count);
  if (fp.op == CommOp::kBroadcast) absl::StrAppend(&s, ", root ", fp.root);
  if (IsReduction(fp.op) && fp.reduce_op != ReduceOp::kSum) absl::StrAppend(&s, ", ", ReduceOpName(fp.reduce_op));
  absl::StrAppend(&s, ")");
  return s;
}

std::string JoinRanks(const std::vector<int>& ranks) { return absl::StrJoin(ranks, ","); }

std::optional<std::string> DescribeMismatch(const std::string& group,
                                            const std::vector<CollectiveFingerprint>& fps) {
  if (fps.empty()) return std::nullopt;
  // Distinct fingerprints in order of their lowest rank, with their ranks.
  std::vector<CollectiveFingerprint> distinct;
  std::vector<std::vector<int>> ranks;
  for (int r = 0; r < static_cast<int>(fps.size()); ++r) {
    size_t i = 0;
    while (i < distinct.size() && distinct[i] != fps[r]) ++i;
    if (i == distinct.size()) {
      distinct.push_back(fps[r]);
      ranks.emplace_back();
    }
    ranks[i].push_back(r);
  }
  if (distinct.size() == 1) return std::nullopt;
  const int64_t seq = fps[0].seq;
  std::string msg = absl::StrCat("collective #", seq, " mismatch in group ", group, ": ");
  for (size_t i = 0; i < distinct.size(); ++i) {
    if (i > 0) absl::StrAppend(&msg, ", ");
    absl::StrAppend(&msg, ranks[i].size() == 1 ? "rank " : "ranks ", JoinRanks(ranks[i]), " called ");
    if (distinct[i].seq != seq) absl::StrAppend(&msg, "#", distinct[i].seq, " ");
    absl::StrAppend(&msg, DescribeCollective(distinct[i]));
  }
  return msg;
}

}  // namespace zeroshard
