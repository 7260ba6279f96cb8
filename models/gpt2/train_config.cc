#include "models/gpt2/train_config.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "engine/config_checker.h"
#include "engine/config_loader.h"

namespace zeroshard {
namespace {

// GPT-2 under tensor parallelism: whole heads and equal slices per rank
// (vocabulary rows are padded, so vocab_size needs no rule).
void CheckModelParallel(const ModelConfig& m, const ParallelConfig& p, ConfigChecker& c) {
  const int tp = p.tp();
  if (tp <= 1) return;
  if (m.n_head() >= 1 && m.n_head() % tp != 0) {
    c.Add(absl::StrCat("model.n_head: ", m.n_head(), " is not a multiple of engine.parallel.tp = ", tp,
                       " (each tp rank holds whole heads)"));
  }
  if (m.n_embd() >= 1 && m.n_embd() % tp != 0) {
    c.Add(absl::StrCat("model.n_embd: ", m.n_embd(), " is not a multiple of engine.parallel.tp = ", tp));
  }
  if (p.sequence_parallel() && m.seq_len() >= 1 && m.seq_len() % tp != 0) {
    c.Add(absl::StrCat("model.seq_len: ", m.seq_len(), " is not a multiple of engine.parallel.tp = ", tp,
                       " (engine.parallel.sequence_parallel splits the sequence)"));
  }
}

void CheckModel(const ModelConfig& m, ConfigChecker& c) {
  c.Range("model.n_layer", m.n_layer(), 1, 1024);
  c.Range("model.n_head", m.n_head(), 1, 1024);
  c.Range("model.n_embd", m.n_embd(), 1, 1 << 16);
  c.Range("model.vocab_size", m.vocab_size(), 2, 1 << 20);
  c.Range("model.seq_len", m.seq_len(), 1, 1 << 16);
  if (m.n_head() >= 1 && m.n_embd() >= 1 && m.n_embd() % m.n_head() != 0) {
    c.Add(absl::StrCat("model.n_head: ", m.n_head(), " does not divide model.n_embd = ", m.n_embd()));
  }
}

void CheckData(const TrainConfig& t, ConfigChecker& c) {
  if (t.data().train_path().empty()) c.Add("data.train_path: must be set to a token file");
  c.AtLeast("data.eval_batches", t.data().eval_batches(), 1);
  c.AtLeast("steps", t.steps(), 0);
  c.AtLeast("eval_interval", t.eval_interval(), 0);
  if (t.eval_interval() > 0 && t.data().val_path().empty()) {
    c.Add(absl::StrCat("eval_interval: ", t.eval_interval(), " needs data.val_path to be set"));
  }
}

}  // namespace

std::vector<std::string> TrainConfigErrors(const TrainConfig& config, const ValidationOptions& options) {
  ConfigChecker c;
  CheckModel(config.model(), c);
  CheckModelParallel(config.model(), config.engine().parallel(), c);
  CheckData(config, c);
  ValidationOptions engine_options = options;
  engine_options.batch_field = "data.batch_size";
  for (std::string& e : EngineConfigErrors(config.engine(), config.data().batch_size(), engine_options)) {
    c.Add(std::move(e));
  }
  return c.Take();
}

int MicroBatchSize(const TrainConfig& config) {
  return static_cast<int>(MicroBatchSize(config.engine(), config.data().batch_size()));
}

absl::StatusOr<TrainConfig> ParseTrainConfig(absl::string_view text, absl::string_view source_name) {
  TrainConfig config;
  RETURN_IF_ERROR(ParseConfigText(text, source_name, &config));
  return config;
}

absl::StatusOr<TrainConfig> LoadTrainConfig(const std::string& path, const std::vector<std::string>& overrides,
                                            int world_size) {
  TrainConfig config;
  RETURN_IF_ERROR(LoadConfigMessage(path, overrides, TrainConfig::descriptor()->full_name(), &config));
  ValidationOptions options;
  options.world_size = world_size;
  RETURN_IF_ERROR(InvalidConfig(path, TrainConfigErrors(config, options)));
  return config;
}

}  // namespace zeroshard
