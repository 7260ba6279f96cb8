#include "examples/gpt2_model_config.h"

#include <algorithm>

namespace zeroshard {

Gpt2Config Gpt2ConfigFromTrainConfig(const TrainConfig& config) {
  const ModelConfig& m = config.model();
  Gpt2Config gc;
  gc.n_layer = m.n_layer();
  gc.n_head = m.n_head();
  gc.n_embd = m.n_embd();
  gc.vocab_size = m.vocab_size();
  gc.seq_len = m.seq_len();
  gc.vocab_multiple = std::max(1, config.engine().parallel().tp());
  return gc;
}

}  // namespace zeroshard
