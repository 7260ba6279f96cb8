#include "kernels/cpu/lion_cpu.h"

#include "kernels/cpu/parallel.h"

namespace zeroshard::kernels::cpu {

void LionUpdate(int threads, float* param, const float* grad, float* exp_avg, int64_t n, const LionScalars& s) {
  ParallelFor(threads, n, MinItems(4), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) LionElement(param[i], grad[i], exp_avg[i], s);
  });
}

}  // namespace zeroshard::kernels::cpu
