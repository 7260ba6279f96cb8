// CPU optimizer updates (contract in kernels/optimizer.h), element-wise over
// blocks of threads: thread-count independent.
#ifndef ZEROSHARD_KERNELS_CPU_OPTIMIZER_CPU_H_
#define ZEROSHARD_KERNELS_CPU_OPTIMIZER_CPU_H_

#include <cstdint>

#include "kernels/pointwise_math.h"

namespace zeroshard::kernels::cpu {

void AdamWUpdate(int threads, float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                 const AdamWScalars& s);

void SgdUpdate(int threads, float* param, const float* grad, float* momentum_buf, int64_t n, float lr,
               float momentum, float dampening, float weight_decay, bool nesterov, bool first_step);

}  // namespace zeroshard::kernels::cpu

#endif  // ZEROSHARD_KERNELS_CPU_OPTIMIZER_CPU_H_
