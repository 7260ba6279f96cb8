// OptimizerStateKind: one tensor an optimizer keeps per parameter element,
// as a plug-in declares it (sharding/optimizer.h). Checkpoints, memory
// accounting and the state views walk these without knowing the optimizer.
#ifndef ZEROSHARD_SHARDING_OPTIMIZER_STATE_KIND_H_
#define ZEROSHARD_SHARDING_OPTIMIZER_STATE_KIND_H_

#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace zeroshard {

// One state tensor kind an optimizer keeps per region (f32 AdamW m, v; SGD momentum; Lion's momentum).
struct OptimizerStateKind {
  std::string name;             // "exp_avg", "exp_avg_sq", "momentum", ...
  DType dtype = DType::kF32;
  int64_t bytes_per_element = 4;
  std::string checkpoint_name;  // the suffix shard files and manifests use
};

}  // namespace zeroshard

#endif  // ZEROSHARD_SHARDING_OPTIMIZER_STATE_KIND_H_
