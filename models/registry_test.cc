#include "models/registry.h"

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ModelRegistryTest, TheShippedModelsAreRegistered) {
  EXPECT_EQ(ModelRegistry::Global().names(), (std::vector<std::string>{"classifier", "gpt2"}));
  EXPECT_EQ(ModelRegistry::Global().Describe(),
            "classifier (zeroshard.ClassifierTrainConfig), gpt2 (zeroshard.TrainConfig)");
  absl::StatusOr<const ModelRegistration*> gpt2 = ModelRegistry::Global().FindByMessage(kHeaderlessConfigMessage);
  ASSERT_TRUE(gpt2.ok()) << gpt2.status();
  EXPECT_EQ((*gpt2)->name, "gpt2");
}

TEST(ModelRegistryTest, AnUnknownNameListsTheRegisteredOnes) {
  absl::StatusOr<const ModelRegistration*> m = ModelRegistry::Global().Find("llama");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m.status().message(), "no model named 'llama' is registered; registered: classifier, gpt2");
  m = ModelRegistry::Global().FindByMessage("zeroshard.LlamaConfig");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m.status().message(),
            "no registered model reads zeroshard.LlamaConfig; registered: classifier "
            "(zeroshard.ClassifierTrainConfig), gpt2 (zeroshard.TrainConfig)");
}

// Every registered model: its default run config prints and parses back to
// the same message, builds a model that validates, and records itself in a
// checkpoint manifest under its name.
TEST(ModelRegistryTest, EveryModelRoundTripsItsConfigAndBuilds) {
  const ModelRegistry& registry = ModelRegistry::Global();
  for (const std::string& name : registry.names()) {
    SCOPED_TRACE(name);
    absl::StatusOr<const ModelRegistration*> m = registry.Find(name);
    ASSERT_TRUE(m.ok()) << m.status();
    std::unique_ptr<google::protobuf::Message> config((*m)->prototype->New());
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString("steps: 7 engine { seed: 99 }", config.get()));
    std::string text;
    ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(*config, &text));
    absl::StatusOr<std::unique_ptr<google::protobuf::Message>> parsed = ParseRunConfig(**m, text, "round-trip");
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(**parsed, *config)) << text;
    EXPECT_EQ((*m)->steps(**parsed), 7);
    EXPECT_EQ((*m)->engine(**parsed).seed(), 99u);

    absl::StatusOr<std::unique_ptr<Model>> model = (*m)->build(**parsed, RankCoordinates{});
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_GE((*model)->units.size(), 2u);
    EXPECT_TRUE((*model)->Validate().ok());
    EXPECT_FALSE((*m)->summarize(**parsed, **model).model_summary.empty());

    const CheckpointRunConfig record = RunRecordOf(**m, **parsed);
    EXPECT_EQ(record.model_name(), name);
    EXPECT_EQ(record.config_message(), (*m)->prototype->GetDescriptor()->full_name());
    EXPECT_EQ(record.engine().seed(), 99u);
    absl::StatusOr<std::unique_ptr<google::protobuf::Message>> again =
        ParseRunConfig(**m, record.config_text(), "manifest");
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(**again, *config));
  }
}

TEST(ModelRegistryTest, AConfigNamingNoRegisteredModelIsAnError) {
  const std::string path = WriteTemp("unknown.pbtxt", "# proto-message: zeroshard.RegressionConfig\nsteps: 1\n");
  absl::StatusOr<LoadedRunConfig> c = LoadRunConfigFile(ModelRegistry::Global(), path, {}, -1);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(), path + ": '# proto-message: zeroshard.RegressionConfig' names no registered model; "
                                         "registered: classifier (zeroshard.ClassifierTrainConfig), gpt2 "
                                         "(zeroshard.TrainConfig)");
}

TEST(ModelRegistryTest, RegistrationsAreCompleteAndUnique) {
  ModelRegistry registry;
  absl::StatusOr<const ModelRegistration*> gpt2 = ModelRegistry::Global().Find("gpt2");
  ASSERT_TRUE(gpt2.ok());
  ModelRegistration copy = **gpt2;
  ASSERT_TRUE(registry.Register(copy).ok());
  absl::Status again = registry.Register(copy);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(again.message(), "a model named 'gpt2' is registered already");
  copy.name = "gpt2-copy";
  again = registry.Register(copy);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(again.message(),
            "model 'gpt2-copy' registers zeroshard.TrainConfig, which model 'gpt2' registered already");
  copy.build = nullptr;
  again = registry.Register(copy);
  EXPECT_EQ(again.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(again.message(), "model registration 'gpt2-copy' has no build; every part is required");
}

}  // namespace
}  // namespace zeroshard
