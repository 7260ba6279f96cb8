// The matrix multiplications of one GPT-2 training step (forward, input
// gradients, weight gradients of every Linear and of the tied LM head), and
// a measurement of OpenBLAS sgemm's rate on exactly those shapes: the floor
// the step benchmark compares against ("time its GEMMs need at the measured
// rate"). Attention's per-head products are excluded (about 1% of the FLOPs
// at T = 64; they are reported separately).
#ifndef ZEROSHARD_BENCH_KERNELS_GPT2_GEMM_RATE_H_
#define ZEROSHARD_BENCH_KERNELS_GPT2_GEMM_RATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/transpose.h"

namespace zeroshard::bench {

struct Gpt2Shape {
  int64_t batch = 4, seq_len = 64, channels = 768, vocab = 50257, layers = 12, heads = 12;
};

// One GEMM C[M,N] = op(A)·op(B) (row-major, kernels/gemm.h) and how many
// times a training step runs it.
struct GemmShape {
  std::string name;  // "c_fc fwd", "lm_head dW", ...
  kernels::Transpose trans_a, trans_b;
  int64_t m, n, k;
  int64_t per_step;
  double Flops() const { return 2.0 * m * n * k; }
};

std::vector<GemmShape> Gpt2StepGemms(const Gpt2Shape& s);

// FLOPs of one step's GEMMs (sum of Flops() * per_step).
double StepGemmFlops(const std::vector<GemmShape>& gemms);

// FLOPs of attention's per-head products in one step (forward + backward).
double StepAttentionFlops(const Gpt2Shape& s);

struct GemmTiming {
  GemmShape shape;
  double seconds;  // median of the repetitions, one call
  double gflops;
};

// Times cblas_sgemm on each shape (f32, fresh random operands, OpenBLAS's
// configured threads), `reps` timed calls after one warm-up; reports the
// median per shape.
std::vector<GemmTiming> TimeGemms(const std::vector<GemmShape>& gemms, int reps);

// Seconds one step's GEMMs take at the measured per-shape times, and the
// aggregate rate (StepGemmFlops / that time) in GFLOP/s.
struct StepGemmRate {
  double seconds;
  double gflops;
};
StepGemmRate AggregateRate(const std::vector<GemmTiming>& timings);

}  // namespace zeroshard::bench

#endif  // ZEROSHARD_BENCH_KERNELS_GPT2_GEMM_RATE_H_
