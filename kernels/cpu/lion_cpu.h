// CPU Lion update (contract in kernels/lion.h), element-wise over blocks of
// threads: thread-count independent.
#ifndef ZEROSHARD_KERNELS_CPU_LION_CPU_H_
#define ZEROSHARD_KERNELS_CPU_LION_CPU_H_

#include <cstdint>

#include "kernels/lion_math.h"

namespace zeroshard::kernels::cpu {

void LionUpdate(int threads, float* param, const float* grad, float* exp_avg, int64_t n, const LionScalars& s);

}  // namespace zeroshard::kernels::cpu

#endif  // ZEROSHARD_KERNELS_CPU_LION_CPU_H_
