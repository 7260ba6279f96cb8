// SGD as an optimizer plug-in (PyTorch torch.optim.SGD semantics,
// kernels/optimizer.h): state momentum (f32) when momentum > 0, none
// otherwise; config fields momentum, dampening, nesterov.
#ifndef ZEROSHARD_SHARDING_OPTIMIZERS_SGD_H_
#define ZEROSHARD_SHARDING_OPTIMIZERS_SGD_H_

#include "sharding/optimizer.h"

namespace zeroshard {

const Optimizer& SgdOptimizer();

}  // namespace zeroshard

#endif  // ZEROSHARD_SHARDING_OPTIMIZERS_SGD_H_
