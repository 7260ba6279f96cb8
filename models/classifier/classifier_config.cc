#include "models/classifier/classifier_config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "engine/config_checker.h"
#include "engine/config_loader.h"
#include "models/registry.h"

namespace zeroshard {

std::vector<std::string> ClassifierConfigErrors(const ClassifierTrainConfig& config, const ValidationOptions& options) {
  ConfigChecker c;
  const ClassifierModelConfig& m = config.model();
  c.Range("model.input_dim", m.input_dim(), 1, 4096);
  c.Range("model.projection_dim", m.projection_dim(), 1, 4096);
  c.Range("model.hidden", m.hidden_size(), 0, 64);
  for (int i = 0; i < m.hidden_size(); ++i) c.Range(absl::StrCat("model.hidden[", i, "]"), m.hidden(i), 1, 4096);
  c.Range("model.num_classes", m.num_classes(), 2, 4096);
  const ClassifierDataConfig& d = config.data();
  c.Range("data.train_examples", d.train_examples(), 1, 1 << 24);
  c.Range("data.eval_examples", d.eval_examples(), 1, 1 << 24);
  c.AtLeast("data.noise", d.noise(), 0);
  c.HalfOpen01("data.unlabeled_fraction", d.unlabeled_fraction());
  c.AtLeast("steps", config.steps(), 0);
  // The units are plain f32 loops.
  const DTypeProto compute = config.engine().precision().compute_dtype();
  if (compute != F32) {
    c.Add(absl::StrCat("engine.precision.compute_dtype: ", DTypeProto_Name(compute),
                       " is not supported by the classifier's units; expected F32"));
  }
  ValidationOptions engine_options = options;
  engine_options.batch_field = "data.batch_size";
  for (std::string& e : EngineConfigErrors(config.engine(), d.batch_size(), engine_options)) c.Add(std::move(e));
  return c.Take();
}

absl::StatusOr<ClassifierTrainConfig> LoadClassifierConfig(const std::string& path,
                                                           const std::vector<std::string>& overrides, int world_size) {
  ClassifierTrainConfig config;
  RETURN_IF_ERROR(LoadRunConfigMessage(path, overrides, &config));
  ValidationOptions options;
  options.world_size = world_size;
  RETURN_IF_ERROR(InvalidConfig(path, ClassifierConfigErrors(config, options)));
  return config;
}

EngineConfig ClassifierEngineConfig(const ClassifierTrainConfig& config) {
  EngineConfig engine = config.engine();
  LrScheduleConfig* lr = engine.mutable_lr_schedule();
  if (lr->type() != LrScheduleConfig::CONSTANT && lr->decay_steps() == 0) {
    lr->set_decay_steps(std::max(config.steps(), lr->warmup_steps() + 1));
  }
  return engine;
}

BlobOptions ClassifierBlobOptions(const ClassifierTrainConfig& config, BlobSplit split) {
  BlobOptions o;
  o.seed = config.data().seed();
  o.examples = split == BlobSplit::kTrain ? config.data().train_examples() : config.data().eval_examples();
  o.input_dim = config.model().input_dim();
  o.num_classes = config.model().num_classes();
  o.noise = config.data().noise();
  // Held-out examples are all labeled: accuracy is over every one of them.
  o.unlabeled_fraction = split == BlobSplit::kTrain ? config.data().unlabeled_fraction() : 0.0;
  return o;
}

}  // namespace zeroshard
