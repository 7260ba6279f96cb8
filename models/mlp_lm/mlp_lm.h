// A user-defined model for the embedding guide (docs/guide.md): a small
// token-wise MLP language model built from zeroshard's nn layers, written as
// FSDP-style units the Engine shards, gathers and trains.
//
//   "embed"   wte [V,C], wpe [T,C]          x = wte[tok] + wpe[t]
//   "mlp.i"   fc [C,4C]+b, proj [4C,C]+b    x = x + proj(gelu(fc(x)))
//   "head"    out [C,V]+b                   loss = cross_entropy(x·out + b)
#ifndef ZEROSHARD_MODELS_MLP_LM_MLP_LM_H_
#define ZEROSHARD_MODELS_MLP_LM_MLP_LM_H_

#include <memory>

#include "nn/model.h"

namespace zeroshard {

std::unique_ptr<Model> BuildMlpLm(int n_layer, int vocab_size, int seq_len, int channels);

}  // namespace zeroshard

#endif  // ZEROSHARD_MODELS_MLP_LM_MLP_LM_H_
