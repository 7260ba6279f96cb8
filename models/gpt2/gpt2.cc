#include "models/gpt2/gpt2.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "models/gpt2/gpt2_units.h"

namespace zeroshard {

absl::Status Gpt2Config::Validate() const {
  const std::pair<const char*, int> fields[] = {
      {"n_layer", n_layer}, {"n_head", n_head}, {"n_embd", n_embd}, {"vocab_size", vocab_size}, {"seq_len", seq_len},
      {"vocab_multiple", vocab_multiple}};
  for (const auto& [field, value] : fields) {
    if (value < 1) return absl::InvalidArgumentError(absl::StrCat("gpt2 ", field, " is ", value, ", expected >= 1"));
  }
  if (n_embd % n_head != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpt2 n_embd ", n_embd, " is not a multiple of n_head ", n_head));
  }
  return absl::OkStatus();
}

int64_t Gpt2Config::padded_vocab_size() const {
  const int64_t m = vocab_multiple < 1 ? 1 : vocab_multiple;
  return (static_cast<int64_t>(vocab_size) + m - 1) / m * m;
}

absl::StatusOr<std::unique_ptr<Model>> BuildGpt2(const Gpt2Config& config) {
  RETURN_IF_ERROR(config.Validate());
  auto model = std::make_unique<Model>();
  model->units.push_back(std::make_unique<Gpt2EmbedUnit>(config));
  for (int i = 0; i < config.n_layer; ++i) model->units.push_back(std::make_unique<Gpt2BlockUnit>(config, i));
  model->units.push_back(std::make_unique<Gpt2HeadUnit>(config));
  // Hugging Face files carry the tied head again and the causal-mask buffers.
  model->ignored_import_tensors = {"lm_head.weight", "*.attn.bias", "*.attn.masked_bias"};
  RETURN_IF_ERROR(model->Validate());
  return model;
}

Batch Gpt2Batch(const TensorView& inputs, const TensorView& targets) {
  return Batch{{"inputs", inputs}, {"targets", targets}};
}

int64_t Gpt2ForwardGemmFlops(const Gpt2Config& config, int64_t batch, int64_t seq_len) {
  const int64_t n = batch * seq_len;
  const int64_t c = config.n_embd;
  // Per layer: c_attn (C x 3C), attn.c_proj (C x C), c_fc (C x 4C), mlp.c_proj (4C x C)
  // = 12 C^2 multiply-adds per token; attention's q·k^T and att·v over the full
  // T x T (the CPU kernel computes the masked half too) = 2 T C per token.
  const int64_t per_layer = n * 12 * c * c + 2 * batch * seq_len * seq_len * c;
  const int64_t head = n * c * config.padded_vocab_size();
  return 2 * (config.n_layer * per_layer + head);
}

}  // namespace zeroshard
