// `zeroshard ckpt diff`: per-tensor differences between two checkpoints of
// the same model (any dp and tp each: tensors are compared whole, in the
// shape users see).
#ifndef ZEROSHARD_CHECKPOINT_DIFF_H_
#define ZEROSHARD_CHECKPOINT_DIFF_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/checkpoint_reader.h"

namespace zeroshard {

struct TensorDiff {
  std::string name;   // parameter name
  std::string kind;   // "master", "exp_avg", ...
  int64_t numel = 0;
  // max |a - b|, and max |a - b| / max(|a|, |b|) (0 where both are 0).
  // A NaN on one side only, or infinities that differ, count as +inf.
  double max_abs = 0;
  double max_rel = 0;
};

// Every parameter of every kind both checkpoints hold, in unit, kind,
// parameter order. kFailedPrecondition naming the first difference when the
// units, parameter names or whole unpadded shapes (ParamSpec::logical())
// differ.
absl::StatusOr<std::vector<TensorDiff>> DiffCheckpoints(const CheckpointReader& a, const CheckpointReader& b);

// The element-wise statistics of one pair of equal-length arrays.
void DiffValues(const float* a, const float* b, int64_t n, TensorDiff* out);

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_DIFF_H_
