// ToyModel: a tiny language model with GPT-2's unit structure, written with
// plain loops, for engine tests that must not depend on nn/'s kernels.
//
// B batch, T sequence length, C channels, V vocabulary.
//   "embed":  wte.weight [V,C], wpe.weight [T,C];  x = wte[tok] + wpe[t]
//   "blk.i":  blk.i.fc.weight [C,C], blk.i.fc.bias [C];  x = x + tanh(x·W + b)
//   "head":   ln_f.weight [C] (a per-channel scale, init ones), borrows
//             wte.weight;  logits = (x ⊙ s)·wteᵀ; loss = cross-entropy summed over
//             the targets >= 0, weight = their count (a negative target is padding).
// The batch: "inputs" and "targets", i32 (B, T).
// Parameters named like GPT-2's so the default no-decay patterns apply.
#ifndef ZEROSHARD_ENGINE_TESTING_TOY_MODEL_H_
#define ZEROSHARD_ENGINE_TESTING_TOY_MODEL_H_

#include <memory>

#include "nn/model.h"

namespace zeroshard {

struct ToyModelConfig {
  int n_layer = 2;
  int n_embd = 16;
  int vocab_size = 67;
  int seq_len = 8;
  // When >= 0, a target equal to it makes the head's backward add NaN to the
  // ln_f.weight gradient (to test skipped steps).
  int nan_target = -1;
  // false: the head owns no parameter (only the borrowed wte): a unit with
  // an empty flat buffer.
  bool head_scale = true;
  // true: the head owns wte.weight (after ln_f.weight) and the embedding
  // borrows it — a unit borrowing from a LATER unit. Same math.
  bool head_owns_wte = false;
};

std::unique_ptr<Model> BuildToyModel(const ToyModelConfig& config);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_TESTING_TOY_MODEL_H_
