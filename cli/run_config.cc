#include "cli/run_config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"
#include "engine/config_loader.h"
#include "engine/model_config_validation.h"
#include "examples/classifier/classifier_config.h"
#include "examples/classifier/classifier_model.h"
#include "examples/gpt2_model_config.h"
#include "google/protobuf/text_format.h"
#include "nn/gpt2.h"

namespace zeroshard::cli {
namespace {

absl::StatusOr<RunConfig> LoadGpt2(const std::string& path, const std::vector<std::string>& overrides,
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
  run.rows_name = "sequences";
  run.batch_note = absl::StrCat("; ", run.global_batch * config.model().seq_len(), " tokens/step");
  run.training_summary = absl::StrCat(config.steps(), " steps, eval every ", config.eval_interval(), ", train data ",
                                      config.data().train_path());
  google::protobuf::TextFormat::PrintToString(config, &run.normalized_text);
  const Gpt2Config gc = Gpt2ConfigFromTrainConfig(config);
  run.build_model = [gc]() { return BuildGpt2(gc); };
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, run.build_model());
  run.model_summary = absl::StrFormat("GPT-2 n_layer=%d n_head=%d n_embd=%d vocab_size=%d seq_len=%d: %d parameters",
                                      gc.n_layer, gc.n_head, gc.n_embd, gc.vocab_size, gc.seq_len,
                                      model->num_logical_params());
  return run;
}

absl::StatusOr<RunConfig> LoadClassifier(const std::string& path, const std::vector<std::string>& overrides,
                                         int world_size) {
  ASSIGN_OR_RETURN(ClassifierTrainConfig config, LoadClassifierConfig(path, overrides, world_size));
  RunConfig run;
  run.kind = "classifier";
  run.engine = ClassifierEngineConfig(config);
  run.global_batch = config.data().batch_size();
  run.rows_name = "examples";
  const ClassifierDataConfig& d = config.data();
  run.training_summary =
      absl::StrFormat("%d steps, %d generated training examples (seed %d, %g unlabeled), %d held out", config.steps(),
                      d.train_examples(), d.seed(), d.unlabeled_fraction(), d.eval_examples());
  google::protobuf::TextFormat::PrintToString(config, &run.normalized_text);
  const ClassifierModelConfig m = config.model();
  run.build_model = [m]() { return BuildClassifier(m); };
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, run.build_model());
  int64_t trainable = 0;
  for (const auto& unit : model->units) {
    for (const ParamSpec& p : unit->params()) trainable += p.trainable ? p.numel() : 0;
  }
  run.model_summary = absl::StrFormat(
      "classifier input_dim=%d projection_dim=%d%s hidden=[%s] num_classes=%d: %d parameters, %d trainable",
      m.input_dim(), m.projection_dim(), m.freeze_input_layer() ? " (frozen)" : "", absl::StrJoin(m.hidden(), ", "),
      m.num_classes(), model->num_params(), trainable);
  return run;
}

struct Kind {
  const char* message;
  absl::StatusOr<RunConfig> (*load)(const std::string& path, const std::vector<std::string>& overrides,
                                    int world_size);
};

const Kind kKinds[] = {
    {kDefaultConfigMessage, LoadGpt2},
    {"zeroshard.ClassifierTrainConfig", LoadClassifier},
};

}  // namespace

std::vector<std::string> KnownConfigMessages() {
  std::vector<std::string> names;
  for (const Kind& k : kKinds) names.push_back(k.message);
  return names;
}

absl::StatusOr<RunConfig> LoadRunConfig(const std::string& path, const std::vector<std::string>& overrides,
                                        int world_size) {
  ASSIGN_OR_RETURN(const std::string text, ReadConfigFile(path));
  const std::string message = ConfigMessageNameOrDefault(text);
  for (const Kind& k : kKinds) {
    if (message != k.message) continue;
    ASSIGN_OR_RETURN(RunConfig run, k.load(path, overrides, world_size));
    run.message_name = message;
    ASSIGN_OR_RETURN(std::unique_ptr<Model> model, run.build_model());
    RETURN_IF_ERROR(InvalidConfig(path, EngineModelErrors(run.engine, *model)));
    return run;
  }
  return absl::InvalidArgumentError(absl::StrCat(path, ": '# proto-message: ", message,
                                                 "' names no config kind zeroshard knows; known: ",
                                                 absl::StrJoin(KnownConfigMessages(), ", ")));
}

}  // namespace zeroshard::cli
