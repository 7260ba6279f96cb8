// Lion as an optimizer plug-in (kernels/lion.h): state exp_avg (the
// momentum m), f32; config fields beta1, beta2 with Lion's own defaults
// 0.9 and 0.99; weight decay decoupled, as the paper's
// p -= lr*(sign(c) + wd*p). Takes no eps, momentum, dampening or nesterov.
#ifndef ZEROSHARD_SHARDING_OPTIMIZERS_LION_H_
#define ZEROSHARD_SHARDING_OPTIMIZERS_LION_H_

#include "sharding/optimizer.h"

namespace zeroshard {

const Optimizer& LionOptimizer();

}  // namespace zeroshard

#endif  // ZEROSHARD_SHARDING_OPTIMIZERS_LION_H_
