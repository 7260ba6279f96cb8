#include "kernels/cpu/optimizer_cpu.h"

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_isa.h"

namespace zeroshard::kernels::cpu {

namespace {

// The lerp form is chosen once per call so the loop is branch-free and
// vectorizes (vector sqrt/div round exactly like the scalar ones); compiled
// per vector ISA (vector_isa.h).
template <bool kSmallWeight>
struct AdamWBlock {
  ZS_FORCE_INLINE static void Run(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
                                  float* __restrict exp_avg_sq, int64_t b, int64_t e, const AdamWScalars s) {
    for (int64_t i = b; i < e; ++i) AdamWElementT<kSmallWeight>(param[i], grad[i], exp_avg[i], exp_avg_sq[i], s);
  }
};

}  // namespace

void AdamWUpdate(int threads, float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                 const AdamWScalars& s) {
  ParallelFor(threads, n, MinItems(4), [&](int64_t b, int64_t e) {
    if (s.one_minus_beta1 < 0.5f) {
      RunVectorized<AdamWBlock<true>>(param, grad, exp_avg, exp_avg_sq, b, e, s);
    } else {
      RunVectorized<AdamWBlock<false>>(param, grad, exp_avg, exp_avg_sq, b, e, s);
    }
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
