#include "kernels/cpu/lion_cpu.h"

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_isa.h"

namespace zeroshard::kernels::cpu {

namespace {

// Compiled per vector ISA (vector_isa.h).
struct LionBlock {
  ZS_FORCE_INLINE static void Run(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
                                  int64_t b, int64_t e, const LionScalars s) {
    for (int64_t i = b; i < e; ++i) LionElement(param[i], grad[i], exp_avg[i], s);
  }
};

}  // namespace

void LionUpdate(int threads, float* param, const float* grad, float* exp_avg, int64_t n, const LionScalars& s) {
  ParallelFor(threads, n, MinItems(4), [&](int64_t b, int64_t e) {
    RunVectorized<LionBlock>(param, grad, exp_avg, b, e, s);
  });
}

}  // namespace zeroshard::kernels::cpu
