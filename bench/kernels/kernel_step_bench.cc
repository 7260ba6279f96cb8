// One GPT-2 training step (forward, backward, AdamW) written directly
// against the kernels, timed per kernel and compared with the time the
// step's GEMMs need at sgemm's rate measured in the same run. It bounds what
// the nn/ model can reach and shows where the non-GEMM time goes.
//
//   kernel_step_bench [--threads=N] [--steps=3] [--batch=4] [--seq_len=64]
//                     [--layers=12] [--channels=768] [--heads=12] [--vocab=50257]
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/kernels/gpt2_gemm_rate.h"
#include "core/status_macros.h"
#include "kernels/attention.h"
#include "kernels/context.h"
#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/gelu.h"
#include "kernels/gemm.h"
#include "kernels/layernorm.h"
#include "kernels/linear.h"
#include "kernels/optimizer.h"
#include "kernels/residual.h"

ABSL_FLAG(int, threads, 0, "CPU threads (0: cores / local ranks)");
ABSL_FLAG(int, steps, 3, "timed steps after one warm-up step");
ABSL_FLAG(int64_t, batch, 4, "B");
ABSL_FLAG(int64_t, seq_len, 64, "T");
ABSL_FLAG(int64_t, layers, 12, "n_layer");
ABSL_FLAG(int64_t, channels, 768, "n_embd");
ABSL_FLAG(int64_t, heads, 12, "n_head");
ABSL_FLAG(int64_t, vocab, 50257, "vocab_size");

namespace zeroshard::bench {
namespace {

using kernels::KernelContext;
using kernels::Transpose;
constexpr DType kF32 = DType::kF32;

// Accumulates wall time per kernel name.
class Timer {
 public:
  template <typename Fn>
  absl::Status Run(const std::string& name, Fn&& fn) {
    auto t0 = std::chrono::steady_clock::now();
    absl::Status s = fn();
    seconds_[name] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return s;
  }
  std::map<std::string, double>& seconds() { return seconds_; }

 private:
  std::map<std::string, double> seconds_;
};

struct LayerParams {
  float *ln1_w, *ln1_b, *attn_w, *attn_b, *proj_w, *proj_b, *ln2_w, *ln2_b, *fc_w, *fc_b, *fcp_w, *fcp_b;
};

struct LayerActs {
  std::vector<float> ln1, ln1_mean, ln1_rstd, qkv, att_lse, atty, res1, ln2, ln2_mean, ln2_rstd, fch, fch_gelu, out;
};

class Gpt2KernelStep {
 public:
  explicit Gpt2KernelStep(const Gpt2Shape& s) : s_(s) {
    const int64_t c = s.channels;
    const int64_t per_layer = 2 * c + c * 3 * c + 3 * c + c * c + c + 2 * c + c * 4 * c + 4 * c + 4 * c * c + c;
    num_params_ = s.vocab * c + s.seq_len * c + s.layers * per_layer + 2 * c;
    params_.assign(num_params_, 0.0f);
    grads_.assign(num_params_, 0.0f);
    m_.assign(num_params_, 0.0f);
    v_.assign(num_params_, 0.0f);
    std::mt19937 gen(7);
    std::normal_distribution<float> d(0.0f, 0.02f);
    for (auto& p : params_) p = d(gen);
    float* p = params_.data();
    auto take = [&](int64_t n) {
      float* r = p;
      p += n;
      return r;
    };
    wte_ = take(s.vocab * c);
    wpe_ = take(s.seq_len * c);
    for (int64_t l = 0; l < s.layers; ++l) {
      LayerParams lp;
      lp.ln1_w = take(c), lp.ln1_b = take(c), lp.attn_w = take(c * 3 * c), lp.attn_b = take(3 * c);
      lp.proj_w = take(c * c), lp.proj_b = take(c), lp.ln2_w = take(c), lp.ln2_b = take(c);
      lp.fc_w = take(c * 4 * c), lp.fc_b = take(4 * c), lp.fcp_w = take(4 * c * c), lp.fcp_b = take(c);
      for (float* w : {lp.ln1_w, lp.ln2_w}) std::fill(w, w + c, 1.0f);
      layers_.push_back(lp);
    }
    lnf_w_ = take(c), lnf_b_ = take(c);
    std::fill(lnf_w_, lnf_w_ + c, 1.0f);
    const int64_t n = s.batch * s.seq_len;
    acts_.resize(s.layers);
    for (auto& a : acts_) {
      a.ln1.resize(n * c), a.ln1_mean.resize(n), a.ln1_rstd.resize(n), a.qkv.resize(n * 3 * c);
      a.att_lse.resize(s.batch * s.heads * s.seq_len), a.atty.resize(n * c), a.res1.resize(n * c);
      a.ln2.resize(n * c), a.ln2_mean.resize(n), a.ln2_rstd.resize(n), a.fch.resize(n * 4 * c);
      a.fch_gelu.resize(n * 4 * c), a.out.resize(n * c);
    }
    encoded_.resize(n * c), lnf_.resize(n * c), lnf_mean_.resize(n), lnf_rstd_.resize(n);
    logits_.resize(n * s.vocab), losses_.resize(n), lse_.resize(n);
    dres_.resize(n * c), dtmp_.resize(n * c), dln_.resize(n * c), dfc_.resize(n * 4 * c), dqkv_.resize(n * 3 * c);
    scratch_.resize(kernels::AttentionBackwardScratchElements(s.batch, s.seq_len, s.heads));
    std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(s.vocab - 1));
    tokens_.resize(n), targets_.resize(n);
    for (auto& t : tokens_) t = tok(gen);
    for (auto& t : targets_) t = tok(gen);
  }

  int64_t num_params() const { return num_params_; }

  absl::Status Step(Timer& tm, int64_t step, float* loss) {
    const KernelContext ctx = KernelContext::Cpu();
    const int64_t b = s_.batch, t = s_.seq_len, c = s_.channels, nh = s_.heads, v = s_.vocab, n = b * t;
    std::fill(grads_.begin(), grads_.end(), 0.0f);
    // ---- forward
    RETURN_IF_ERROR(tm.Run("embedding", [&] {
      return kernels::EmbeddingForward(ctx, encoded_.data(), tokens_.data(), wte_, wpe_, b, t, c, v, kF32);
    }));
    const float* x = encoded_.data();
    for (int64_t l = 0; l < s_.layers; ++l) {
      LayerParams& p = layers_[l];
      LayerActs& a = acts_[l];
      RETURN_IF_ERROR(tm.Run("layernorm", [&] {
        return kernels::LayerNormForward(ctx, a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x, p.ln1_w, p.ln1_b,
                                         n, c, 1e-5f, kF32);
      }));
      RETURN_IF_ERROR(tm.Run("linear (gemm)", [&] {
        return kernels::LinearForward(ctx, a.qkv.data(), a.ln1.data(), p.attn_w, p.attn_b, n, c, 3 * c, kF32);
      }));
      RETURN_IF_ERROR(tm.Run("attention", [&] {
        return kernels::AttentionForward(ctx, a.atty.data(), a.att_lse.data(), a.qkv.data(), b, t, c, nh, kF32);
      }));
      RETURN_IF_ERROR(tm.Run("linear (gemm)", [&] {
        return kernels::LinearForward(ctx, a.res1.data(), a.atty.data(), p.proj_w, p.proj_b, n, c, c, kF32);
      }));
      RETURN_IF_ERROR(tm.Run("residual", [&] { return kernels::AddInPlace(ctx, a.res1.data(), x, n * c, kF32); }));
      RETURN_IF_ERROR(tm.Run("layernorm", [&] {
        return kernels::LayerNormForward(ctx, a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.res1.data(),
                                         p.ln2_w, p.ln2_b, n, c, 1e-5f, kF32);
      }));
      RETURN_IF_ERROR(tm.Run("linear (gemm)", [&] {
        return kernels::LinearForward(ctx, a.fch.data(), a.ln2.data(), p.fc_w, p.fc_b, n, c, 4 * c, kF32);
      }));
      RETURN_IF_ERROR(
          tm.Run("gelu", [&] { return kernels::GeluForward(ctx, a.fch_gelu.data(), a.fch.data(), n * 4 * c, kF32); }));
      RETURN_IF_ERROR(tm.Run("linear (gemm)", [&] {
        return kernels::LinearForward(ctx, a.out.data(), a.fch_gelu.data(), p.fcp_w, p.fcp_b, n, 4 * c, c, kF32);
      }));
      RETURN_IF_ERROR(
          tm.Run("residual", [&] { return kernels::AddInPlace(ctx, a.out.data(), a.res1.data(), n * c, kF32); }));
      x = a.out.data();
    }
    RETURN_IF_ERROR(tm.Run("layernorm", [&] {
      return kernels::LayerNormForward(ctx, lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), x, lnf_w_, lnf_b_, n, c,
                                       1e-5f, kF32);
    }));
    RETURN_IF_ERROR(tm.Run("lm head (gemm)", [&] {
      return kernels::Gemm(ctx, Transpose::kNo, Transpose::kYes, n, v, c, 1.0f, lnf_.data(), c, wte_, c, 0.0f,
                           logits_.data(), v, kF32);
    }));
    float loss_sums[2];  // sum, count
    RETURN_IF_ERROR(tm.Run("cross entropy", [&] {
      return kernels::CrossEntropyForward(ctx, losses_.data(), lse_.data(), loss_sums, logits_.data(), targets_.data(),
                                          n, v, kF32);
    }));
    *loss = loss_sums[0] / loss_sums[1];
    // ---- backward
    RETURN_IF_ERROR(tm.Run("cross entropy", [&] {
      return kernels::CrossEntropyBackward(ctx, logits_.data(), logits_.data(), lse_.data(), targets_.data(),
                                           1.0f / static_cast<float>(n), n, v, kF32);
    }));
    float* dwte = grads_.data() + (wte_ - params_.data());
    RETURN_IF_ERROR(tm.Run("lm head (gemm)", [&] {
      RETURN_IF_ERROR(kernels::Gemm(ctx, Transpose::kNo, Transpose::kNo, n, c, v, 1.0f, logits_.data(), v, wte_, c,
                                    0.0f, dln_.data(), c, kF32));
      return kernels::Gemm(ctx, Transpose::kYes, Transpose::kNo, v, c, n, 1.0f, logits_.data(), v, lnf_.data(), c,
                           1.0f, dwte, c, kF32);
    }));
    auto g = [&](const float* param) { return grads_.data() + (param - params_.data()); };
    RETURN_IF_ERROR(tm.Run("layernorm", [&] {
      return kernels::LayerNormBackward(ctx, dres_.data(), g(lnf_w_), g(lnf_b_), dln_.data(), x, lnf_w_,
                                        lnf_mean_.data(), lnf_rstd_.data(), n, c, kF32);
    }));
    for (int64_t l = s_.layers - 1; l >= 0; --l) {
      LayerParams& p = layers_[l];
      LayerActs& a = acts_[l];
      const float* block_in = l == 0 ? encoded_.data() : acts_[l - 1].out.data();
      RETURN_IF_ERROR(tm.Run("linear (gemm)", [&] {
        return kernels::LinearBackward(ctx, dfc_.data(), g(p.fcp_w), g(p.fcp_b), dres_.data(), a.fch_gelu.data(),
                                       p.fcp_w, n, 4 * c, c, kF32);
      }));
      RETURN_IF_ERROR(tm.Run("gelu", [&] {
        return kernels::GeluBackward(ctx, dfc_.data(), a.fch.data(), dfc_.data(), n * 4 * c, kF32);
      }));
      RETURN_IF_ERROR(tm.Run("linear (gemm)", [&] {
        return kernels::LinearBackward(ctx, dln_.data(), g(p.fc_w), g(p.fc_b), dfc_.data(), a.ln2.data(), p.fc_w, n, c,
                                       4 * c, kF32);
      }));
      RETURN_IF_ERROR(tm.Run("layernorm", [&] {
        return kernels::LayerNormBackward(ctx, dtmp_.data(), g(p.ln2_w), g(p.ln2_b), dln_.data(), a.res1.data(),
                                          p.ln2_w, a.ln2_mean.data(), a.ln2_rstd.data(), n, c, kF32);
      }));
      RETURN_IF_ERROR(
          tm.Run("residual", [&] { return kernels::AddInPlace(ctx, dres_.data(), dtmp_.data(), n * c, kF32); }));
      RETURN_IF_ERROR(tm.Run("linear (gemm)", [&] {
        return kernels::LinearBackward(ctx, dln_.data(), g(p.proj_w), g(p.proj_b), dres_.data(), a.atty.data(),
                                       p.proj_w, n, c, c, kF32);
      }));
      RETURN_IF_ERROR(tm.Run("attention", [&] {
        return kernels::AttentionBackward(ctx, dqkv_.data(), scratch_.data(), dln_.data(), a.qkv.data(),
                                          a.atty.data(), a.att_lse.data(), b, t, c, nh, kF32);
      }));
      RETURN_IF_ERROR(tm.Run("linear (gemm)", [&] {
        return kernels::LinearBackward(ctx, dln_.data(), g(p.attn_w), g(p.attn_b), dqkv_.data(), a.ln1.data(),
                                       p.attn_w, n, c, 3 * c, kF32);
      }));
      RETURN_IF_ERROR(tm.Run("layernorm", [&] {
        return kernels::LayerNormBackward(ctx, dtmp_.data(), g(p.ln1_w), g(p.ln1_b), dln_.data(), block_in, p.ln1_w,
                                          a.ln1_mean.data(), a.ln1_rstd.data(), n, c, kF32);
      }));
      RETURN_IF_ERROR(
          tm.Run("residual", [&] { return kernels::AddInPlace(ctx, dres_.data(), dtmp_.data(), n * c, kF32); }));
    }
    RETURN_IF_ERROR(tm.Run("embedding", [&] {
      return kernels::EmbeddingBackward(ctx, dwte, g(wpe_), dres_.data(), tokens_.data(), b, t, c, v, kF32);
    }));
    // ---- update
    return tm.Run("adamw", [&] {
      return kernels::AdamWUpdate(ctx, params_.data(), grads_.data(), m_.data(), v_.data(), num_params_,
                                  kernels::AdamWHyper{6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, step});
    });
  }

 private:
  Gpt2Shape s_;
  int64_t num_params_;
  std::vector<float> params_, grads_, m_, v_;
  float *wte_, *wpe_, *lnf_w_, *lnf_b_;
  std::vector<LayerParams> layers_;
  std::vector<LayerActs> acts_;
  std::vector<float> encoded_, lnf_, lnf_mean_, lnf_rstd_, logits_, losses_, lse_;
  std::vector<float> dres_, dtmp_, dln_, dfc_, dqkv_, scratch_;
  std::vector<int32_t> tokens_, targets_;
};

int Main() {
  kernels::SetCpuThreads(kernels::CpuThreadsOrDefault(absl::GetFlag(FLAGS_threads)));
  Gpt2Shape s;
  s.batch = absl::GetFlag(FLAGS_batch), s.seq_len = absl::GetFlag(FLAGS_seq_len), s.layers = absl::GetFlag(FLAGS_layers);
  s.channels = absl::GetFlag(FLAGS_channels), s.heads = absl::GetFlag(FLAGS_heads), s.vocab = absl::GetFlag(FLAGS_vocab);
  const int steps = absl::GetFlag(FLAGS_steps);
  Gpt2KernelStep model(s);
  Timer warm;
  float loss = 0;
  if (absl::Status st = model.Step(warm, 1, &loss); !st.ok()) {
    std::fprintf(stderr, "step failed: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  Timer tm;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) {
    if (absl::Status st = model.Step(tm, 2 + i, &loss); !st.ok()) {
      std::fprintf(stderr, "step failed: %s\n", std::string(st.message()).c_str());
      return 1;
    }
  }
  const double step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / steps;
  // The floor, measured now on the same shapes.
  std::vector<GemmShape> gemms = Gpt2StepGemms(s);
  StepGemmRate floor = AggregateRate(TimeGemms(gemms, 3));
  const double flops = StepGemmFlops(gemms) + StepAttentionFlops(s);
  std::printf("GPT-2 kernels-only step: %lld params, B=%lld T=%lld, %d threads, mean of %d steps (loss %.3f)\n",
              static_cast<long long>(model.num_params()), static_cast<long long>(s.batch),
              static_cast<long long>(s.seq_len), kernels::CpuThreads(), steps, loss);
  std::printf("%-16s %10s %7s\n", "kernel", "ms/step", "share");
  for (auto& [name, sec] : tm.seconds()) {
    std::printf("%-16s %10.1f %6.1f%%\n", name.c_str(), sec / steps * 1e3, 100.0 * sec / steps / step_s);
  }
  std::printf("step %.3f s, %.1f GFLOP/s achieved (GEMM + attention FLOPs / step time)\n", step_s,
              flops / step_s * 1e-9);
  std::printf("GEMM floor %.3f s (sgemm %.1f GFLOP/s on the step's shapes, this run); step / floor = %.2fx\n",
              floor.seconds, floor.gflops, step_s / floor.seconds);
  return 0;
}

}  // namespace
}  // namespace zeroshard::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return zeroshard::bench::Main();
}
