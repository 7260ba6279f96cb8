// AdamW as an optimizer plug-in (PyTorch torch.optim.AdamW semantics,
// kernels/optimizer.h): state exp_avg (m) and exp_avg_sq (v), f32;
// config fields beta1, beta2, eps.
#ifndef ZEROSHARD_SHARDING_OPTIMIZERS_ADAMW_H_
#define ZEROSHARD_SHARDING_OPTIMIZERS_ADAMW_H_

#include "sharding/optimizer.h"

namespace zeroshard {

const Optimizer& AdamWOptimizer();

}  // namespace zeroshard

#endif  // ZEROSHARD_SHARDING_OPTIMIZERS_ADAMW_H_
