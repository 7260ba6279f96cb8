// GPT-2 training step on one rank on CPU: forward + backward + AdamW update,
// against the time cblas_sgemm needs for the step's matrix multiplications
// measured in the same run: each repeat times a full step and then the step's
// GEMMs alone, back to back, so a busy machine slows both alike. The floor is
// OpenBLAS threading one call itself (the reference); the step's own GEMMs
// run OpenBLAS single-threaded over fixed tiles (kernels/cpu/gemm_tiles.h),
// timed alongside so the cost of bitwise thread independence shows.
//
//   single_rank_step_bench [--threads=N] [--repeats=5] [--batch=4] [--seq=64]
//
// Default model: GPT-2 124M (12 layers, 768 channels, 12 heads, vocab 50257,
// 1024 positions), batch 4 x 64 tokens. Prints a table (docs/model.md) and
// where the step's time goes by category (core/step_profile.h): wall and CPU
// time of the median step, the categories adding up to it.
#include <cblas.h>
#include <malloc.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/single_rank/step_gemm_shapes.h"
#include "core/buffer.h"
#include "core/host_heap.h"
#include "core/step_profile.h"
#include "kernels/context.h"
#include "kernels/gemm.h"
#include "kernels/optimizer.h"
#include "models/gpt2/gpt2.h"
#include "nn/resident_model.h"

ABSL_FLAG(int, threads, 0, "CPU threads for kernels and OpenBLAS (0: cores / ranks)");
ABSL_FLAG(int, repeats, 5, "timed steps (after one warm-up step); the median is reported");
ABSL_FLAG(int, batch, 4, "sequences per step");
ABSL_FLAG(int, seq, 64, "tokens per sequence");
ABSL_FLAG(int, n_layer, 12, "layers");
ABSL_FLAG(int, n_embd, 768, "channels");
ABSL_FLAG(int, n_head, 12, "heads");
ABSL_FLAG(int, vocab, 50257, "vocabulary");
// Units allocate their activations every step (~250 MB here); without the
// engine's heap policy (core/host_heap.h) every step faults them in again.
ABSL_FLAG(bool, keep_freed_memory, true,
          "apply the engine's heap policy (core/host_heap.h): freed memory stays in the process");

namespace zeroshard {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// CPU seconds used by the whole process (all threads). On a busy machine wall
// time includes waiting for a core; CPU time does not.
double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "single_rank_step_bench: %s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}

// Operands for one GEMM shape, allocated once and reused by every timing.
struct GemmOperands {
  explicit GemmOperands(const GemmShape& shape) : g(shape), a(g.m * g.k), b(g.k * g.n), c(g.m * g.n) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float& x : a) x = u(rng);
    for (float& x : b) x = u(rng);
  }
  // OpenBLAS's own threading (the caller sets its thread count).
  void Call() {
    cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans,
                static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), 1.0f, a.data(),
                static_cast<int>(g.trans_a ? g.m : g.k), b.data(), static_cast<int>(g.trans_b ? g.k : g.n), 0.0f,
                c.data(), static_cast<int>(g.n));
  }
  // What the step runs: kernels::Gemm over its fixed tiles.
  void CallTiled() {
    Check(kernels::Gemm(kernels::KernelContext::Cpu(), g.trans_a ? kernels::Transpose::kYes : kernels::Transpose::kNo,
                        g.trans_b ? kernels::Transpose::kYes : kernels::Transpose::kNo, g.m, g.n, g.k, 1.0f, a.data(),
                        g.trans_a ? g.m : g.k, b.data(), g.trans_b ? g.k : g.n, 0.0f, c.data(), g.n, DType::kF32),
          "Gemm");
  }
  GemmShape g;
  std::vector<float> a, b, c;
};

// The step's time by category in the repeat whose step time is the median
// (one repeat, so the rows add up to its step), beside the step's tiled GEMMs
// run alone in the same repeat.
void PrintBreakdown(const std::vector<step_profile::Totals>& profiles, const std::vector<double>& step_s,
                    const std::vector<double>& tiled_s) {
  std::vector<size_t> order(step_s.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return step_s[a] < step_s[b]; });
  const size_t median = order[order.size() / 2];
  const step_profile::Totals& p = profiles[median];
  double wall = 0, cpu = 0;
  for (int c = 0; c < step_profile::kNumCategories; ++c) {
    wall += p.wall_s[c];
    cpu += p.cpu_s[c];
  }
  std::printf("\nWhere the median step's time goes (repeat %zu of %zu; wall and CPU time of all threads):\n",
              median + 1, step_s.size());
  std::printf("| category | wall ms | wall %% | CPU ms | CPU %% |\n|---|---|---|---|---|\n");
  for (int c = 0; c < step_profile::kNumCategories; ++c) {
    std::printf("| %s | %.1f | %.1f | %.1f | %.1f |\n", step_profile::CategoryName(static_cast<step_profile::Category>(c)),
                1e3 * p.wall_s[c], 100 * p.wall_s[c] / wall, 1e3 * p.cpu_s[c], 100 * p.cpu_s[c] / cpu);
  }
  std::printf("| step (sum of the rows) | %.1f | 100.0 | %.1f | 100.0 |\n", 1e3 * wall, 1e3 * cpu);
  std::printf("| the step's GEMMs alone (tiled, same repeat) | %.1f | %.1f | | |\n", 1e3 * tiled_s[median],
              100 * tiled_s[median] / wall);
}

int Run() {
  if (absl::GetFlag(FLAGS_keep_freed_memory)) KeepFreedHostMemory();
  const int threads = kernels::CpuThreadsOrDefault(absl::GetFlag(FLAGS_threads));
  kernels::SetCpuThreads(threads);
  const Gpt2Config cfg{absl::GetFlag(FLAGS_n_layer), absl::GetFlag(FLAGS_n_head), absl::GetFlag(FLAGS_n_embd),
                       absl::GetFlag(FLAGS_vocab), 1024};
  const int64_t b = absl::GetFlag(FLAGS_batch), t = absl::GetFlag(FLAGS_seq);
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));

  auto model_or = BuildGpt2(cfg);
  Check(model_or.status(), "BuildGpt2");
  std::unique_ptr<Model> model = std::move(*model_or);
  MemoryTracker tracker;
  ComputeContext ctx;
  ctx.tracker = &tracker;
  auto rm_or = ResidentModel::Create(model.get(), ctx);
  Check(rm_or.status(), "ResidentModel");
  ResidentModel& rm = *rm_or;
  Check(rm.InitParams(1), "InitParams");
  std::vector<Buffer> m, v;
  for (int u = 0; u < rm.num_units(); ++u) {
    for (auto* state : {&m, &v}) {
      auto buf = Buffer::AllocateZeroed(&tracker, MemoryCategory::kOptimizerState, Device::kCpu, DType::kF32,
                                  rm.unit_params(u).numel());
      Check(buf.status(), "optimizer state");
      state->push_back(std::move(*buf));
    }
  }
  std::mt19937 rng(7);
  std::vector<int32_t> inputs(b * t), targets(b * t);
  for (auto& x : inputs) x = static_cast<int32_t>(rng() % cfg.vocab_size);
  for (auto& x : targets) x = static_cast<int32_t>(rng() % cfg.vocab_size);
  const Batch batch = Gpt2Batch(TensorView{inputs.data(), DType::kI32, {b, t}, Device::kCpu},
                                TensorView{targets.data(), DType::kI32, {b, t}, Device::kCpu});

  std::vector<GemmOperands> gemms;
  for (const GemmShape& g : Gpt2StepGemms(cfg, b, t)) gemms.emplace_back(g);

  // Each repeat times one full step, then the step's GEMMs on their own (every
  // shape, as many calls as the step makes), back to back, so both see the same
  // machine; the ratio is taken per repeat. Repeat 0 is a warm-up.
  std::vector<double> step_s, zero_s, fb_s, opt_s, gemm_total_s, tiled_total_s, ratio, tiled_ratio, cpu_ratio,
      step_cpu_s, gemm_cpu_s;
  std::vector<step_profile::Totals> profiles;
  std::vector<std::vector<double>> gemm_s(gemms.size());
  float first_loss = 0;
  for (int r = 0; r <= repeats; ++r) {
    const double c0 = ProcessCpuSeconds();
    const auto t0 = Clock::now();
    step_profile::Start();
    Check(rm.ZeroGrads(), "ZeroGrads");
    const auto t1 = Clock::now();
    auto l = rm.ForwardBackward(batch, 1.0f / static_cast<float>(b * t));
    Check(l.status(), "ForwardBackward");
    if (r == 0) first_loss = static_cast<float>(l->loss.sum / l->loss.weight);
    const auto t2 = Clock::now();
    const kernels::AdamWHyper h{6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, r + 1};
    for (int u = 0; u < rm.num_units(); ++u) {
      Check(kernels::AdamWUpdate(ctx.kernels, rm.unit_params(u).as<float>(), rm.unit_grads(u).as<float>(),
                                 m[u].as<float>(), v[u].as<float>(), rm.unit_params(u).numel(), h),
            "AdamWUpdate");
    }
    const step_profile::Totals profile = step_profile::Stop();
    const auto t3 = Clock::now();
    const double c1 = ProcessCpuSeconds();
    double gemm_total = 0;
    openblas_set_num_threads(threads);
    for (size_t i = 0; i < gemms.size(); ++i) {
      const auto g0 = Clock::now();
      for (int64_t c = 0; c < gemms[i].g.count; ++c) gemms[i].Call();
      const double sec = Seconds(g0, Clock::now());
      gemm_total += sec;
      if (r > 0) gemm_s[i].push_back(sec);
    }
    const double c2 = ProcessCpuSeconds();
    kernels::SetCpuThreads(threads);  // OpenBLAS back to one thread
    const auto g1 = Clock::now();
    for (size_t i = 0; i < gemms.size(); ++i) {
      for (int64_t c = 0; c < gemms[i].g.count; ++c) gemms[i].CallTiled();
    }
    const double tiled_total = Seconds(g1, Clock::now());
    if (r == 0) continue;
    profiles.push_back(profile);
    tiled_total_s.push_back(tiled_total);
    tiled_ratio.push_back(Seconds(t0, t3) / tiled_total);
    step_cpu_s.push_back(c1 - c0);
    gemm_cpu_s.push_back(c2 - c1);
    cpu_ratio.push_back((c1 - c0) / (c2 - c1));
    zero_s.push_back(Seconds(t0, t1));
    fb_s.push_back(Seconds(t1, t2));
    opt_s.push_back(Seconds(t2, t3));
    step_s.push_back(Seconds(t0, t3));
    gemm_total_s.push_back(gemm_total);
    ratio.push_back(Seconds(t0, t3) / gemm_total);
  }

  int64_t gemm_flops = 0;
  std::printf("cblas_sgemm on the step's shapes (%d threads; ms per step, median of %d):\n", threads, repeats);
  std::printf("  %-20s %5s %5s %6s %6s %6s %6s %10s %9s\n", "gemm", "opA", "opB", "M", "N", "K", "calls", "ms/step",
              "GFLOP/s");
  for (size_t i = 0; i < gemms.size(); ++i) {
    const GemmShape& g = gemms[i].g;
    const double total = Median(gemm_s[i]);
    gemm_flops += g.flops();
    std::printf("  %-20s %5s %5s %6lld %6lld %6lld %6lld %10.2f %9.1f\n", g.what.c_str(), g.trans_a ? "T" : "N",
                g.trans_b ? "T" : "N", static_cast<long long>(g.m), static_cast<long long>(g.n),
                static_cast<long long>(g.k), static_cast<long long>(g.count), 1e3 * total, g.flops() / total / 1e9);
  }
  const double gemm_time = Median(gemm_total_s);
  const double step = Median(step_s);
  const int64_t step_flops = 3 * Gpt2ForwardGemmFlops(cfg, b, t);
  std::printf(
      "\nGPT-2 %lld params (L=%d C=%d NH=%d V=%d), batch %lld x %lld tokens, %d threads, %s loops, median of %d steps\n",
      static_cast<long long>(model->num_params()), cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.vocab_size,
      static_cast<long long>(b), static_cast<long long>(t), threads, kernels::DescribeCpuBlas().vector_isa.c_str(),
      repeats);
  std::printf("| quantity | value |\n|---|---|\n");
  std::printf("| step: zero grads + forward/backward + AdamW | %.1f ms |\n", 1e3 * step);
  std::printf("|   zero grads | %.1f ms |\n", 1e3 * Median(zero_s));
  std::printf("|   forward + backward | %.1f ms |\n", 1e3 * Median(fb_s));
  std::printf("|   AdamW update | %.1f ms |\n", 1e3 * Median(opt_s));
  std::printf("| GEMM flops per step (fwd + bwd) | %.2f GFLOP |\n", step_flops / 1e9);
  std::printf("| achieved rate of the whole step | %.1f GFLOP/s |\n", step_flops / step / 1e9);
  std::printf("| cblas_sgemm rate on the step's shapes | %.1f GFLOP/s |\n", gemm_flops / gemm_time / 1e9);
  std::printf("| step GEMM time at that rate | %.1f ms |\n", 1e3 * gemm_time);
  std::printf("| step time / GEMM time (median of per-repeat ratios; target <= 1.15) | %.2f |\n", Median(ratio));
  std::printf("| same, best repeat of each | %.2f |\n",
              *std::min_element(step_s.begin(), step_s.end()) /
                  *std::min_element(gemm_total_s.begin(), gemm_total_s.end()));
  std::printf("| zeroshard's tiled GEMM (the step's own) on the same shapes | %.1f GFLOP/s |\n",
              gemm_flops / Median(tiled_total_s) / 1e9);
  std::printf("| tiled GEMM time / OpenBLAS-threaded GEMM time | %.3f |\n", Median(tiled_total_s) / gemm_time);
  std::printf("| step time / tiled GEMM time (median of per-repeat ratios) | %.2f |\n", Median(tiled_ratio));
  std::printf("| CPU time: step / its GEMMs (all threads; %.0f / %.0f ms) | %.2f |\n", 1e3 * Median(step_cpu_s),
              1e3 * Median(gemm_cpu_s), Median(cpu_ratio));
  std::printf("| first step's loss (random tokens; ln V = %.2f) | %.3f |\n", std::log(static_cast<double>(cfg.vocab_size)),
              first_loss);
  std::printf("| peak activations + workspace | %.1f MiB |\n",
              (tracker.Usage(MemoryCategory::kActivations).peak + tracker.Usage(MemoryCategory::kWorkspace).peak) /
                  1048576.0);
  PrintBreakdown(profiles, step_s, tiled_total_s);
  return 0;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return zeroshard::Run();
}
