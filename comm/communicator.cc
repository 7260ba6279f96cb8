#include "comm/communicator.h"

#include "absl/strings/str_cat.h"

namespace zeroshard {

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
  }
  return "unknown";
}

absl::StatusOr<int64_t> EvenShardCount(int64_t total, int ranks) {
  if (ranks <= 0) return absl::InvalidArgumentError(absl::StrCat("rank count ", ranks, " must be positive"));
  if (total < 0) return absl::InvalidArgumentError(absl::StrCat("element count ", total, " must be >= 0"));
  if (total % ranks != 0) {
    return absl::InvalidArgumentError(absl::StrCat("element count ", total, " does not split evenly over ", ranks,
                                                   " ranks; pad it to ", (total / ranks + 1) * ranks));
  }
  return total / ranks;
}

}  // namespace zeroshard
