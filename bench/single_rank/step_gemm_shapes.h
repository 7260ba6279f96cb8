// The matrix multiplications one GPT-2 training step performs (forward,
// backward), as the kernels issue them: row-major C[M,N] = op(A)·op(B) with
// the transposes of kernels/gemm.h, and how many times each runs.
#ifndef ZEROSHARD_BENCH_SINGLE_RANK_STEP_GEMM_SHAPES_H_
#define ZEROSHARD_BENCH_SINGLE_RANK_STEP_GEMM_SHAPES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "models/gpt2/gpt2.h"

namespace zeroshard {

struct GemmShape {
  std::string what;  // e.g. "c_attn fwd"
  bool trans_a;
  bool trans_b;
  int64_t m, n, k;
  int64_t count;  // calls per step
  int64_t flops() const { return 2 * m * n * k * count; }
};

// Linear layers: forward x·W (no, no), input grad dy·W^T (no, yes), weight
// grad x^T·dy (yes, no). Attention per (batch, head): forward q·k^T and
// att·v, backward datt = dy·v^T, dv = att^T·dy, dq = dS·k, dk = dS^T·q.
// Tied head: logits = x·wte^T, dx = dlogits·wte, dwte = dlogits^T·x.
std::vector<GemmShape> Gpt2StepGemms(const Gpt2Config& config, int64_t batch, int64_t seq_len);

}  // namespace zeroshard

#endif  // ZEROSHARD_BENCH_SINGLE_RANK_STEP_GEMM_SHAPES_H_
