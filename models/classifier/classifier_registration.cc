// The classifier's entry in the model registry (models/registry.h): name
// "classifier", run config zeroshard.ClassifierTrainConfig.
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "models/classifier/classifier_config.h"
#include "models/classifier/classifier_model.h"
#include "models/registry.h"

namespace zeroshard {
namespace {

const ClassifierTrainConfig& Of(const google::protobuf::Message& m) {
  return static_cast<const ClassifierTrainConfig&>(m);
}

ModelRegistration ClassifierRegistration() {
  ModelRegistration r;
  r.name = "classifier";
  r.prototype = &ClassifierTrainConfig::default_instance();
  r.errors = [](const google::protobuf::Message& m, const ValidationOptions& options) {
    return ClassifierConfigErrors(Of(m), options);
  };
  r.engine = [](const google::protobuf::Message& m) -> const EngineConfig& { return Of(m).engine(); };
  r.global_batch = [](const google::protobuf::Message& m) -> int64_t { return Of(m).data().batch_size(); };
  r.steps = [](const google::protobuf::Message& m) -> int64_t { return Of(m).steps(); };
  r.build = [](const google::protobuf::Message& m, const RankCoordinates&) { return BuildClassifier(Of(m).model()); };
  r.summarize = [](const google::protobuf::Message& msg, const Model& model) {
    const ClassifierTrainConfig& config = Of(msg);
    const ClassifierDataConfig& d = config.data();
    const ClassifierModelConfig& m = config.model();
    RunSummary s;
    s.rows_name = "examples";
    s.training_summary =
        absl::StrFormat("%d steps, %d generated training examples (seed %d, %g unlabeled), %d held out",
                        config.steps(), d.train_examples(), d.seed(), d.unlabeled_fraction(), d.eval_examples());
    int64_t trainable = 0;
    for (const auto& unit : model.units) {
      for (const ParamSpec& p : unit->params()) trainable += p.trainable ? p.numel() : 0;
    }
    s.model_summary = absl::StrFormat(
        "classifier input_dim=%d projection_dim=%d%s hidden=[%s] num_classes=%d: %d parameters, %d trainable",
        m.input_dim(), m.projection_dim(), m.freeze_input_layer() ? " (frozen)" : "", absl::StrJoin(m.hidden(), ", "),
        m.num_classes(), model.num_params(), trainable);
    return s;
  };
  r.tensor_naming = "input.weight, hidden.N.weight / .bias, head.weight / .bias; nothing is skipped on import";
  return r;
}

}  // namespace

ZS_REGISTER_MODEL(ClassifierRegistration());

}  // namespace zeroshard
