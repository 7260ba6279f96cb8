#include "cli/run_config.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "core/status_macros.h"
#include "engine/config_loader.h"
#include "google/protobuf/text_format.h"
#include "nn/gpt2.h"

namespace zeroshard::cli {
namespace {

Gpt2Config Gpt2FromProto(const ModelConfig& m) {
  Gpt2Config gc;
  gc.n_layer = m.n_layer();
  gc.n_head = m.n_head();
  gc.n_embd = m.n_embd();
  gc.vocab_size = m.vocab_size();
  gc.seq_len = m.seq_len();
  return gc;
}

}  // namespace

absl::StatusOr<RunConfig> LoadRunConfig(const std::string& path, const std::vector<std::string>& overrides,
                                        int world_size) {
  ASSIGN_OR_RETURN(TrainConfig config, LoadTrainConfig(path, overrides, world_size));
  RunConfig run;
  run.kind = "gpt2";
  run.engine = config.engine();
  LrScheduleConfig* lr = run.engine.mutable_lr_schedule();
  if (lr->type() != LrScheduleConfig::CONSTANT && lr->decay_steps() == 0) {
    lr->set_decay_steps(std::max(config.steps(), lr->warmup_steps() + 1));
  }
  run.global_batch = config.data().batch_size();
  google::protobuf::TextFormat::PrintToString(config, &run.normalized_text);
  const Gpt2Config gc = Gpt2FromProto(config.model());
  run.build_model = [gc]() { return BuildGpt2(gc); };
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, run.build_model());
  run.model_summary = absl::StrFormat("GPT-2 n_layer=%d n_head=%d n_embd=%d vocab_size=%d seq_len=%d: %d parameters",
                                      gc.n_layer, gc.n_head, gc.n_embd, gc.vocab_size, gc.seq_len,
                                      model->num_params());
  return run;
}

}  // namespace zeroshard::cli
