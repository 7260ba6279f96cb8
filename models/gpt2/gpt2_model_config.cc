#include "models/gpt2/gpt2_model_config.h"

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

long long Gpt2ParamCount(const ModelConfig& m) {
  const long long C = m.n_embd(), V = m.vocab_size(), T = m.seq_len(), L = m.n_layer();
  return V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
}

}  // namespace zeroshard
