#include "bench/single_rank/step_gemm_shapes.h"

namespace zeroshard {

std::vector<GemmShape> Gpt2StepGemms(const Gpt2Config& config, int64_t batch, int64_t seq_len) {
  const int64_t n = batch * seq_len, c = config.n_embd, v = config.vocab_size, l = config.n_layer;
  const int64_t hs = c / config.n_head, heads = batch * config.n_head * l, t = seq_len;
  std::vector<GemmShape> g;
  auto linear = [&](const std::string& name, int64_t in, int64_t out) {
    g.push_back({name + " fwd", false, false, n, out, in, l});
    g.push_back({name + " dx", false, true, n, in, out, l});
    g.push_back({name + " dW", true, false, in, out, n, l});
  };
  linear("c_attn", c, 3 * c);
  linear("attn.c_proj", c, c);
  linear("c_fc", c, 4 * c);
  linear("mlp.c_proj", 4 * c, c);
  g.push_back({"attn q.k^T", false, true, t, t, hs, heads});
  g.push_back({"attn att.v", false, false, t, hs, t, heads});
  g.push_back({"attn datt=dy.v^T", false, true, t, t, hs, heads});
  g.push_back({"attn dv=att^T.dy", true, false, t, hs, t, heads});
  g.push_back({"attn dq=dS.k", false, false, t, hs, t, heads});
  g.push_back({"attn dk=dS^T.q", true, false, t, hs, t, heads});
  g.push_back({"lm_head fwd", false, true, n, v, c, 1});
  g.push_back({"lm_head dx", false, false, n, c, v, 1});
  g.push_back({"lm_head dwte", true, false, v, c, n, 1});
  return g;
}

}  // namespace zeroshard
