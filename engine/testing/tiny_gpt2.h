// The GPT-2 the multi-rank engine and checkpoint tests train: 2 heads,
// C = 16, T = 8, and V = 67, a prime, so no unit's size divides evenly by
// dp 2, 3 or 4 and every test exercises shard padding.
#ifndef ZEROSHARD_ENGINE_TESTING_TINY_GPT2_H_
#define ZEROSHARD_ENGINE_TESTING_TINY_GPT2_H_

#include "models/gpt2/gpt2.h"

namespace zeroshard {

inline Gpt2Config TinyGpt2(int n_layer = 2) {
  Gpt2Config c;
  c.n_layer = n_layer;
  c.n_head = 2;
  c.n_embd = 16;
  c.vocab_size = 67;
  c.seq_len = 8;
  return c;
}

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_TESTING_TINY_GPT2_H_
