#include "bench/kernels/gpt2_gemm_rate.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "kernels/context.h"
#include "kernels/gemm.h"

namespace zeroshard::bench {

using kernels::Transpose;

std::vector<GemmShape> Gpt2StepGemms(const Gpt2Shape& s) {
  const int64_t n = s.batch * s.seq_len, c = s.channels, l = s.layers;
  std::vector<GemmShape> out;
  // Linear x (N,in) · W (in,out): forward, dx = dy·W^T, dW += x^T·dy.
  auto linear = [&](const std::string& name, int64_t in, int64_t o) {
    out.push_back({name + " fwd", Transpose::kNo, Transpose::kNo, n, o, in, l});
    out.push_back({name + " dx", Transpose::kNo, Transpose::kYes, n, in, o, l});
    out.push_back({name + " dW", Transpose::kYes, Transpose::kNo, in, o, n, l});
  };
  linear("c_attn", c, 3 * c);
  linear("attn.c_proj", c, c);
  linear("c_fc", c, 4 * c);
  linear("mlp.c_proj", 4 * c, c);
  // Tied head with wte (V,C): logits = x·wte^T, dx = dlogits·wte, dwte += dlogits^T·x.
  out.push_back({"lm_head fwd", Transpose::kNo, Transpose::kYes, n, s.vocab, c, 1});
  out.push_back({"lm_head dx", Transpose::kNo, Transpose::kNo, n, c, s.vocab, 1});
  out.push_back({"lm_head dW", Transpose::kYes, Transpose::kNo, s.vocab, c, n, 1});
  return out;
}

double StepGemmFlops(const std::vector<GemmShape>& gemms) {
  double f = 0;
  for (const auto& g : gemms) f += g.Flops() * g.per_step;
  return f;
}

double StepAttentionFlops(const Gpt2Shape& s) {
  // Forward: scores and att·v, 2·T·T·hs each per (b, h); backward: four such.
  const double per_product = 2.0 * s.seq_len * s.seq_len * (s.channels / s.heads) * s.batch * s.heads;
  return per_product * 6 * s.layers;
}

std::vector<GemmTiming> TimeGemms(const std::vector<GemmShape>& gemms, int reps) {
  std::mt19937 gen(12345);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<GemmTiming> out;
  const kernels::KernelContext ctx = kernels::KernelContext::Cpu();
  for (const auto& g : gemms) {
    const int64_t a_rows = g.trans_a == Transpose::kNo ? g.m : g.k, a_cols = g.trans_a == Transpose::kNo ? g.k : g.m;
    const int64_t b_rows = g.trans_b == Transpose::kNo ? g.k : g.n, b_cols = g.trans_b == Transpose::kNo ? g.n : g.k;
    std::vector<float> a(a_rows * a_cols), b(b_rows * b_cols), c(g.m * g.n, 0.0f);
    for (auto& x : a) x = dist(gen);
    for (auto& x : b) x = dist(gen);
    std::vector<double> times;
    for (int r = 0; r <= reps; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      // beta = 1 for weight gradients (accumulation), as the step does.
      const float beta = g.name.find("dW") != std::string::npos ? 1.0f : 0.0f;
      absl::Status st = kernels::Gemm(ctx, g.trans_a, g.trans_b, g.m, g.n, g.k, 1.0f, a.data(), a_cols, b.data(),
                                      b_cols, beta, c.data(), g.n, DType::kF32);
      auto t1 = std::chrono::steady_clock::now();
      if (!st.ok()) return {};
      if (r > 0) times.push_back(std::chrono::duration<double>(t1 - t0).count());
    }
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    out.push_back({g, median, g.Flops() / median * 1e-9});
  }
  return out;
}

StepGemmRate AggregateRate(const std::vector<GemmTiming>& timings) {
  double seconds = 0, flops = 0;
  for (const auto& t : timings) {
    seconds += t.seconds * t.shape.per_step;
    flops += t.shape.Flops() * t.shape.per_step;
  }
  return {seconds, flops / seconds * 1e-9};
}

}  // namespace zeroshard::bench
