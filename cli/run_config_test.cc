#include "cli/run_config.h"

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"

namespace zeroshard::cli {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

constexpr char kGpt2[] = R"pb(
  model { n_layer: 2 n_head: 2 n_embd: 32 vocab_size: 256 seq_len: 16 }
  data { train_path: "train.bin" batch_size: 12 }
  steps: 10
  engine {
    zero { stage: 3 }
    parallel { dp: 3 }
    lr_schedule { type: WARMUP_COSINE warmup_steps: 2 }
  }
)pb";

constexpr char kClassifier[] = R"pb(# proto-message: zeroshard.ClassifierTrainConfig
  model { input_dim: 4 projection_dim: 8 hidden: 6 hidden: 5 num_classes: 3 }
  data { batch_size: 12 }
  steps: 30
  engine { parallel { dp: 3 } zero { stage: 3 } lr_schedule { type: WARMUP_LINEAR warmup_steps: 40 } }
)pb";

TEST(RunConfigTest, AFileWithoutHeaderIsGpt2) {
  absl::StatusOr<RunConfig> c = LoadRunConfig(WriteTemp("gpt2.pbtxt", kGpt2), {"engine.zero.stage=1"}, 3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->kind, "gpt2");
  EXPECT_EQ(c->message_name, "zeroshard.TrainConfig");
  EXPECT_EQ(c->engine.zero().stage(), 1);
  EXPECT_EQ(c->engine.lr_schedule().decay_steps(), 10);  // resolved to steps
  EXPECT_EQ(c->global_batch, 12);
  absl::StatusOr<std::unique_ptr<Model>> model = c->build_model();
  ASSERT_TRUE(model.ok());
  EXPECT_EQ((*model)->units.size(), 4u);  // embed, h.0, h.1, head

  // Naming its own message changes nothing.
  c = LoadRunConfig(WriteTemp("gpt2_named.pbtxt", std::string("# proto-message: zeroshard.TrainConfig\n") + kGpt2),
                    {}, 3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->kind, "gpt2");
}

TEST(RunConfigTest, TheHeaderSelectsTheClassifier) {
  absl::StatusOr<RunConfig> c = LoadRunConfig(WriteTemp("classifier.pbtxt", kClassifier), {"model.hidden=7"}, 3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->kind, "classifier");
  EXPECT_EQ(c->message_name, "zeroshard.ClassifierTrainConfig");
  EXPECT_EQ(c->rows_name, "examples");
  EXPECT_EQ(c->engine.lr_schedule().decay_steps(), 41);  // max(steps, warmup + 1)
  absl::StatusOr<std::unique_ptr<Model>> model = c->build_model();
  ASSERT_TRUE(model.ok());
  std::vector<std::string> names;
  for (const auto& u : (*model)->units) names.push_back(u->name());
  EXPECT_EQ(names, (std::vector<std::string>{"input", "hidden.0", "hidden.1", "hidden.2", "head"}));
  EXPECT_FALSE((*model)->units[0]->params()[0].trainable);
  EXPECT_NE(c->normalized_text.find("hidden: 7"), std::string::npos) << c->normalized_text;
}

TEST(RunConfigTest, AnUnknownMessageIsNamedWithTheKnownOnes) {
  const std::string path = WriteTemp("unknown.pbtxt", "# proto-message: zeroshard.RegressionConfig\nsteps: 1\n");
  absl::StatusOr<RunConfig> c = LoadRunConfig(path, {}, -1);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(), path + ": '# proto-message: zeroshard.RegressionConfig' names no registered "
                                         "model; registered: classifier (zeroshard.ClassifierTrainConfig), gpt2 "
                                         "(zeroshard.TrainConfig)");
  EXPECT_EQ(KnownConfigMessages().size(), 2u);
  EXPECT_EQ(LoadRunConfig("/no/such.pbtxt", {}, -1).status().code(), absl::StatusCode::kNotFound);
}

TEST(RunConfigTest, NamedCheckpointingUnitsAreCheckedAgainstTheBuiltModel) {
  // GPT-2's units.
  const std::string gpt2 = WriteTemp("gpt2_named_units.pbtxt", kGpt2);
  absl::StatusOr<RunConfig> c = LoadRunConfig(
      gpt2,
      {"engine.activation_checkpointing.policy=NAMED", "engine.activation_checkpointing.units=h.1",
       "engine.activation_checkpointing.units=h.7"},
      3);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(), gpt2 + ": invalid config:\nengine.activation_checkpointing.units: 'h.7' is not a "
                                         "unit of the model; expected one of embed, h.0, h.1, head");
  // The classifier's: its own names pass, GPT-2's do not.
  const std::string classifier = WriteTemp("classifier_named_units.pbtxt", kClassifier);
  c = LoadRunConfig(classifier,
                    {"engine.activation_checkpointing.policy=NAMED", "engine.activation_checkpointing.units=hidden.1"},
                    3);
  ASSERT_TRUE(c.ok()) << c.status();
  c = LoadRunConfig(classifier,
                    {"engine.activation_checkpointing.policy=NAMED", "engine.activation_checkpointing.units=h.0"}, 3);
  EXPECT_EQ(c.status().message(), classifier + ": invalid config:\nengine.activation_checkpointing.units: 'h.0' is "
                                               "not a unit of the model; expected one of input, hidden.0, hidden.1, "
                                               "head");
}

TEST(RunConfigTest, ClassifierErrorsAreListedByField) {
  const std::string path = WriteTemp("classifier_bad.pbtxt", kClassifier);
  absl::StatusOr<RunConfig> c = LoadRunConfig(
      path,
      {"model.num_classes=1", "data.unlabeled_fraction=1", "engine.precision.compute_dtype=BF16",
       "data.batch_size=10"},
      2);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(),
            path + ": invalid config:\n"
                   "model.num_classes: 1 is out of range [2, 4096]\n"
                   "data.unlabeled_fraction: 1 is out of range [0, 1)\n"
                   "engine.precision.compute_dtype: BF16 is not supported by the classifier's units; expected F32\n"
                   "engine.parallel: dp*tp*pp = 3 but the world has 2 ranks\n"
                   "data.batch_size: 10 does not split evenly over dp 3 x gradient_accumulation_steps 1 = 3; "
                   "expected a multiple of 3");
}

}  // namespace
}  // namespace zeroshard::cli
