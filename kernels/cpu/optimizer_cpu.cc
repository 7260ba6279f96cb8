#include "kernels/cpu/optimizer_cpu.h"

#include "kernels/cpu/parallel.h"

namespace zeroshard::kernels::cpu {

void AdamWUpdate(int threads, float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                 const AdamWScalars& s) {
  ParallelFor(threads, n, MinItems(4), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) AdamWElement(param[i], grad[i], exp_avg[i], exp_avg_sq[i], s);
  });
}

void SgdUpdate(int threads, float* param, const float* grad, float* momentum_buf, int64_t n, float lr,
               float momentum, float dampening, float weight_decay, bool nesterov, bool first_step) {
  ParallelFor(threads, n, MinItems(4), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      SgdElement(param[i], grad[i], momentum_buf != nullptr ? &momentum_buf[i] : nullptr, lr, momentum, dampening,
                 weight_decay, nesterov, first_step);
    }
  });
}

}  // namespace zeroshard::kernels::cpu
