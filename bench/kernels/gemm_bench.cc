// OpenBLAS sgemm GFLOP/s on the GEMM shapes of one GPT-2 training step.
//
//   gemm_bench [--threads=N] [--reps=5] [--batch=4] [--seq_len=64]
//
// Prints one row per shape and the aggregate: the time one step's GEMMs need
// at the measured rates, which the step benchmarks use as their floor.
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/kernels/gpt2_gemm_rate.h"
#include "kernels/context.h"

ABSL_FLAG(int, threads, 0, "CPU threads (0: cores / local ranks)");
ABSL_FLAG(int, reps, 5, "timed repetitions per shape (median reported)");
ABSL_FLAG(int64_t, batch, 4, "batch size B");
ABSL_FLAG(int64_t, seq_len, 64, "sequence length T");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using namespace zeroshard;
  kernels::SetCpuThreads(kernels::CpuThreadsOrDefault(absl::GetFlag(FLAGS_threads)));
  bench::Gpt2Shape shape;
  shape.batch = absl::GetFlag(FLAGS_batch);
  shape.seq_len = absl::GetFlag(FLAGS_seq_len);
  std::vector<bench::GemmShape> gemms = bench::Gpt2StepGemms(shape);
  std::vector<bench::GemmTiming> timings = bench::TimeGemms(gemms, absl::GetFlag(FLAGS_reps));
  if (timings.empty()) {
    std::fprintf(stderr, "gemm_bench: Gemm failed\n");
    return 1;
  }
  std::printf("GPT-2 124M GEMMs, B=%lld T=%lld, %d threads, median of %d\n", static_cast<long long>(shape.batch),
              static_cast<long long>(shape.seq_len), kernels::CpuThreads(), absl::GetFlag(FLAGS_reps));
  std::printf("%-18s %6s %6s %6s %9s %10s %8s\n", "gemm", "M", "N", "K", "per step", "ms/call", "GFLOP/s");
  for (const auto& t : timings) {
    std::printf("%-18s %6lld %6lld %6lld %9lld %10.3f %8.1f\n", t.shape.name.c_str(), static_cast<long long>(t.shape.m),
                static_cast<long long>(t.shape.n), static_cast<long long>(t.shape.k),
                static_cast<long long>(t.shape.per_step), t.seconds * 1e3, t.gflops);
  }
  bench::StepGemmRate rate = bench::AggregateRate(timings);
  std::printf("step GEMMs: %.1f GFLOP in %.3f s at the measured rates = %.1f GFLOP/s\n",
              bench::StepGemmFlops(gemms) * 1e-9, rate.seconds, rate.gflops);
  std::printf("attention per-head products (not included): %.2f GFLOP\n", bench::StepAttentionFlops(shape) * 1e-9);
  return 0;
}
