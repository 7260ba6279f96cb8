// GPT-2 exactly as published (Radford et al. 2019; Hugging Face's GPT2LMHeadModel):
// learned token and position embeddings, pre-LayerNorm blocks
//   x = x + attn(ln_1(x));  x = x + mlp(ln_2(x)),
// causal self-attention scaled by 1/sqrt(C / n_head), MLP C -> 4C -> C with
// GELU (tanh approximation), LayerNorm eps 1e-5, final ln_f, LM head tied to
// wte (logits = ln_f(x) · wte^T), no dropout. Parameter names and shapes are
// Hugging Face's; weights are stored [in, out] like its Conv1D.
#ifndef ZEROSHARD_MODELS_GPT2_GPT2_H_
#define ZEROSHARD_MODELS_GPT2_GPT2_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nn/model.h"
#include "nn/param_init.h"  // InitParam: what the engine calls to initialise a full tensor

namespace zeroshard {

struct Gpt2Config {
  int n_layer = 12;
  int n_head = 12;
  int n_embd = 768;
  int vocab_size = 50257;
  int seq_len = 1024;  // rows of wpe: the longest sequence the model accepts
  // wte.weight gets padded_vocab_size() rows: vocab_size rounded up to a
  // multiple of this, the extra rows being padding (ParamSpec::logical_shape;
  // zero, never predicted, zero gradient). A trainer sets it to the tp size
  // so the vocabulary splits evenly (docs/model.md, "Tensor parallelism");
  // 1: no padding.
  int vocab_multiple = 1;

  // Vp: vocab_size rounded up to a multiple of vocab_multiple.
  int64_t padded_vocab_size() const;

  // kInvalidArgument naming the field when a value is < 1 or n_embd is not a
  // multiple of n_head.
  absl::Status Validate() const;
};

inline constexpr float kGpt2LayerNormEps = 1e-5f;

// Units, in order:
//   "embed": wte.weight [Vp,C] (logical [V,C] when Vp > V; split on rows
//            over tp), wpe.weight [T,C]                   (normal 0.02 both)
//   "h.i"  : h.i.ln_1.weight [C] (ones), h.i.ln_1.bias [C] (zeros),
//            h.i.attn.c_attn.weight [C,3C], h.i.attn.c_attn.bias [3C],
//            h.i.attn.c_proj.weight [C,C] (std 0.02/sqrt(2L)), h.i.attn.c_proj.bias [C],
//            h.i.ln_2.weight [C], h.i.ln_2.bias [C],
//            h.i.mlp.c_fc.weight [C,4C], h.i.mlp.c_fc.bias [4C],
//            h.i.mlp.c_proj.weight [4C,C] (std 0.02/sqrt(2L)), h.i.mlp.c_proj.bias [C]
//   "head" : ln_f.weight [C], ln_f.bias [C]; borrows wte.weight; returns the
//            cross-entropy summed over the targets >= 0 and their count (a
//            negative target is padding: no loss, no gradient).
// Weights normal(0, 0.02) unless stated, biases zeros, LayerNorm weights ones.
// Forward accepts any sequence length T <= seq_len. At tp > 1 "embed" and
// "head" are vocabulary-parallel (docs/model.md, "Tensor parallelism").
absl::StatusOr<std::unique_ptr<Model>> BuildGpt2(const Gpt2Config& config);

// The batch GPT-2's units read: "inputs" and "targets", i32 (B, T) each.
Batch Gpt2Batch(const TensorView& inputs, const TensorView& targets);

// Multiply-adds of one forward pass over `tokens` = B*T tokens in GEMMs
// (linear layers, attention QK^T and PV, LM head), times 2 (flops).
// Backward costs twice that; the benchmark uses these numbers.
int64_t Gpt2ForwardGemmFlops(const Gpt2Config& config, int64_t batch, int64_t seq_len);

}  // namespace zeroshard

#endif  // ZEROSHARD_MODELS_GPT2_GPT2_H_
