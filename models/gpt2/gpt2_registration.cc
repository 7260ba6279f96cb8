#include "models/gpt2/gpt2_registration.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/run_record.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_model_config.h"
#include "models/gpt2/train_config.h"

namespace zeroshard {
namespace {

const TrainConfig& Of(const google::protobuf::Message& m) { return static_cast<const TrainConfig&>(m); }

}  // namespace

ModelRegistration Gpt2Registration() {
  ModelRegistration r;
  r.name = kGpt2ModelName;
  r.prototype = &TrainConfig::default_instance();
  r.errors = [](const google::protobuf::Message& m, const ValidationOptions& options) {
    return TrainConfigErrors(Of(m), options);
  };
  r.engine = [](const google::protobuf::Message& m) -> const EngineConfig& { return Of(m).engine(); };
  r.global_batch = [](const google::protobuf::Message& m) -> int64_t { return Of(m).data().batch_size(); };
  r.steps = [](const google::protobuf::Message& m) -> int64_t { return Of(m).steps(); };
  r.build = [](const google::protobuf::Message& m, const RankCoordinates&) {
    return BuildGpt2(Gpt2ConfigFromTrainConfig(Of(m)));
  };
  r.summarize = [](const google::protobuf::Message& m, const Model& model) {
    const TrainConfig& config = Of(m);
    const ModelConfig& mc = config.model();
    RunSummary s;
    s.rows_name = "sequences";
    s.sequence_length = mc.seq_len();
    s.batch_note = absl::StrCat("; ", int64_t{config.data().batch_size()} * mc.seq_len(), " tokens/step");
    s.training_summary = absl::StrCat(config.steps(), " steps, eval every ", config.eval_interval(), ", train data ",
                                      config.data().train_path());
    s.model_summary = absl::StrFormat("GPT-2 n_layer=%d n_head=%d n_embd=%d vocab_size=%d seq_len=%d: %d parameters",
                                      mc.n_layer(), mc.n_head(), mc.n_embd(), mc.vocab_size(), mc.seq_len(),
                                      model.num_logical_params());
    return s;
  };
  r.tensor_naming =
      "Hugging Face GPT-2 names and shapes (wte.weight, h.N.attn.c_attn.weight, ...); an import skips "
      "lm_head.weight (tied to wte) and the attention buffers";
  return r;
}

CheckpointRunConfig Gpt2RunRecord(const TrainConfig& config) {
  return MakeRunRecord(kGpt2ModelName, config, config.engine());
}

ZS_REGISTER_MODEL(Gpt2Registration());

}  // namespace zeroshard
