// An independent f64 GPT-2 forward for gradient checks: plain loops over
// parameters looked up by Hugging Face name, no kernels, no nn/ layers.
#ifndef ZEROSHARD_MODELS_GPT2_TESTING_GPT2_REFERENCE_H_
#define ZEROSHARD_MODELS_GPT2_TESTING_GPT2_REFERENCE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "models/gpt2/gpt2.h"

namespace zeroshard::testing {

using ParamMap = std::map<std::string, std::vector<double>>;

class Gpt2Reference {
 public:
  explicit Gpt2Reference(const Gpt2Config& config) : cfg_(config) {}

  // Mean cross-entropy over B*T positions. tokens, targets (B,T).
  double Loss(const ParamMap& p, const std::vector<int32_t>& tokens, const std::vector<int32_t>& targets, int64_t b,
              int64_t t) const {
    const int64_t c = cfg_.n_embd, v = cfg_.vocab_size, n = b * t;
    const auto& wte = p.at("wte.weight");
    const auto& wpe = p.at("wpe.weight");
    std::vector<double> x(n * c);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < c; ++k) x[i * c + k] = wte[tokens[i] * c + k] + wpe[(i % t) * c + k];
    for (int l = 0; l < cfg_.n_layer; ++l) {
      const std::string h = "h." + std::to_string(l) + ".";
      const auto a = LayerNorm(x, p.at(h + "ln_1.weight"), p.at(h + "ln_1.bias"), n, c);
      const auto qkv = Linear(a, p.at(h + "attn.c_attn.weight"), p.at(h + "attn.c_attn.bias"), n, c, 3 * c);
      const auto att = Attention(qkv, b, t, c, cfg_.n_head);
      const auto proj = Linear(att, p.at(h + "attn.c_proj.weight"), p.at(h + "attn.c_proj.bias"), n, c, c);
      for (int64_t i = 0; i < n * c; ++i) x[i] += proj[i];
      const auto m = LayerNorm(x, p.at(h + "ln_2.weight"), p.at(h + "ln_2.bias"), n, c);
      auto fc = Linear(m, p.at(h + "mlp.c_fc.weight"), p.at(h + "mlp.c_fc.bias"), n, c, 4 * c);
      for (double& z : fc) z = 0.5 * z * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (z + 0.044715 * z * z * z)));
      const auto out = Linear(fc, p.at(h + "mlp.c_proj.weight"), p.at(h + "mlp.c_proj.bias"), n, 4 * c, c);
      for (int64_t i = 0; i < n * c; ++i) x[i] += out[i];
    }
    const auto f = LayerNorm(x, p.at("ln_f.weight"), p.at("ln_f.bias"), n, c);
    double total = 0;
    std::vector<double> logits(v);
    for (int64_t i = 0; i < n; ++i) {
      double mx = -1e300;
      for (int64_t j = 0; j < v; ++j) {
        double s = 0;
        for (int64_t k = 0; k < c; ++k) s += f[i * c + k] * wte[j * c + k];
        logits[j] = s;
        mx = std::max(mx, s);
      }
      double z = 0;
      for (int64_t j = 0; j < v; ++j) z += std::exp(logits[j] - mx);
      total += std::log(z) + mx - logits[targets[i]];
    }
    return total / n;
  }

 private:
  static std::vector<double> LayerNorm(const std::vector<double>& x, const std::vector<double>& w,
                                       const std::vector<double>& bias, int64_t n, int64_t c) {
    std::vector<double> y(n * c);
    for (int64_t r = 0; r < n; ++r) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < c; ++i) mean += x[r * c + i];
      mean /= c;
      for (int64_t i = 0; i < c; ++i) var += (x[r * c + i] - mean) * (x[r * c + i] - mean);
      const double rstd = 1.0 / std::sqrt(var / c + 1e-5);
      for (int64_t i = 0; i < c; ++i) y[r * c + i] = (x[r * c + i] - mean) * rstd * w[i] + bias[i];
    }
    return y;
  }

  static std::vector<double> Linear(const std::vector<double>& x, const std::vector<double>& w,
                                    const std::vector<double>& bias, int64_t n, int64_t in, int64_t out) {
    std::vector<double> y(n * out);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t o = 0; o < out; ++o) {
        double s = bias[o];
        for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * w[i * out + o];
        y[r * out + o] = s;
      }
    return y;
  }

  static std::vector<double> Attention(const std::vector<double>& qkv, int64_t b, int64_t t, int64_t c, int64_t nh) {
    const int64_t hs = c / nh;
    std::vector<double> out(b * t * c, 0.0);
    for (int64_t bb = 0; bb < b; ++bb)
      for (int64_t h = 0; h < nh; ++h)
        for (int64_t i = 0; i < t; ++i) {
          std::vector<double> s(i + 1);
          double mx = -1e300;
          for (int64_t j = 0; j <= i; ++j) {
            double d = 0;
            for (int64_t e = 0; e < hs; ++e)
              d += qkv[(bb * t + i) * 3 * c + h * hs + e] * qkv[(bb * t + j) * 3 * c + c + h * hs + e];
            s[j] = d / std::sqrt(static_cast<double>(hs));
            mx = std::max(mx, s[j]);
          }
          double z = 0;
          for (double& val : s) z += (val = std::exp(val - mx));
          for (int64_t j = 0; j <= i; ++j)
            for (int64_t e = 0; e < hs; ++e)
              out[(bb * t + i) * c + h * hs + e] += s[j] / z * qkv[(bb * t + j) * 3 * c + 2 * c + h * hs + e];
        }
    return out;
  }

  Gpt2Config cfg_;
};

}  // namespace zeroshard::testing

#endif  // ZEROSHARD_MODELS_GPT2_TESTING_GPT2_REFERENCE_H_
