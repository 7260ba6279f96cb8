#include "sharding/zero_policy.h"

#include "absl/strings/str_cat.h"

namespace zeroshard {

absl::StatusOr<ZeroPolicy> ZeroPolicy::ForStage(int stage) {
  if (stage < 0 || stage > 3) {
    return absl::InvalidArgumentError(absl::StrCat("ZeRO stage is ", stage, ", expected 0, 1, 2 or 3"));
  }
  return ZeroPolicy(stage);
}

}  // namespace zeroshard
