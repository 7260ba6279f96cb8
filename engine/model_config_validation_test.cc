#include "engine/model_config_validation.h"

#include "engine/testing/tiny_gpt2.h"
#include "engine/testing/toy_model.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2.h"

namespace zeroshard {
namespace {

EngineConfig Named(std::initializer_list<const char*> units) {
  EngineConfig c;
  c.mutable_activation_checkpointing()->set_policy(ActivationCheckpointingConfig::NAMED);
  for (const char* u : units) c.mutable_activation_checkpointing()->add_units(u);
  return c;
}

TEST(EngineModelErrorsTest, NamedUnitsMustBeUnitsOfTheModel) {
  ToyModelConfig toy;
  toy.n_layer = 2;
  const std::unique_ptr<Model> model = BuildToyModel(toy);
  EXPECT_TRUE(EngineModelErrors(Named({"embed", "blk.1", "head"}), *model).empty());
  const std::vector<std::string> errors = EngineModelErrors(Named({"blk.1", "h.0", "blk.2"}), *model);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0],
            "engine.activation_checkpointing.units: 'h.0' is not a unit of the model; expected one of embed, blk.0, "
            "blk.1, head");
  EXPECT_EQ(errors[1],
            "engine.activation_checkpointing.units: 'blk.2' is not a unit of the model; expected one of embed, "
            "blk.0, blk.1, head");
}

// With selective: true every named unit needs a selective form (GPT-2: the
// blocks); the errors list the units that have one.
TEST(EngineModelErrorsTest, SelectiveNamedUnitsNeedASelectiveForm) {
  EngineConfig c = Named({"embed", "h.1", "head"});
  EXPECT_TRUE(EngineModelErrors(c, *BuildGpt2(TinyGpt2()).value()).empty());  // full checkpointing: any unit
  c.mutable_activation_checkpointing()->set_selective(true);
  std::vector<std::string> errors = EngineModelErrors(c, *BuildGpt2(TinyGpt2()).value());
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0],
            "engine.activation_checkpointing.units: 'embed' has no selective form (selective: true); expected one of "
            "h.0, h.1");
  EXPECT_EQ(errors[1],
            "engine.activation_checkpointing.units: 'head' has no selective form (selective: true); expected one of "
            "h.0, h.1");
  errors = EngineModelErrors(c, *BuildToyModel(ToyModelConfig()));
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0], "engine.activation_checkpointing.units: 'embed' has no selective form (selective: true); no "
                       "unit of the model has one");
  // Policies other than NAMED name no unit: nothing to refuse.
  c.mutable_activation_checkpointing()->set_policy(ActivationCheckpointingConfig::EVERY_KTH);
  c.mutable_activation_checkpointing()->clear_units();
  EXPECT_TRUE(EngineModelErrors(c, *BuildToyModel(ToyModelConfig())).empty());
}

TEST(EngineModelErrorsTest, OtherPoliciesNameNoUnits) {
  EngineConfig c;
  c.mutable_activation_checkpointing()->set_policy(ActivationCheckpointingConfig::EVERY_UNIT);
  EXPECT_TRUE(EngineModelErrors(c, *BuildToyModel(ToyModelConfig())).empty());
}

// The toy model at n_layer 4 has 6 units: embed, blk.0..blk.3, head.
TEST(EngineModelErrorsTest, PipelineChunksFitTheModel) {
  ToyModelConfig toy;
  toy.n_layer = 4;
  const std::unique_ptr<Model> model = BuildToyModel(toy);
  EngineConfig c;
  c.mutable_parallel()->set_pp(6);
  EXPECT_TRUE(EngineModelErrors(c, *model).empty());
  c.mutable_parallel()->set_pp(8);
  using Errors = std::vector<std::string>;
  EXPECT_EQ(EngineModelErrors(c, *model), Errors{"engine.parallel.pp: 8 exceeds the model's 6 units"});
  c.mutable_parallel()->set_pp(4);
  c.mutable_parallel()->set_virtual_stages(2);
  EXPECT_EQ(EngineModelErrors(c, *model),
            Errors{"engine.parallel.pp: 4 x virtual_stages 2 = 8 chunks exceed the model's 6 units"});
  c.mutable_parallel()->set_virtual_stages(1);
  for (int n : {1, 1, 2, 1}) c.mutable_parallel()->add_pp_partition(n);
  EXPECT_EQ(EngineModelErrors(c, *model),
            Errors{"engine.parallel.pp_partition: sums to 5, expected the model's 6 units"});
  c.mutable_parallel()->set_pp_partition(3, 2);
  EXPECT_TRUE(EngineModelErrors(c, *model).empty());
  // pp 1: the pipeline fields are EngineConfigErrors' business.
  c.mutable_parallel()->set_pp(1);
  c.mutable_parallel()->set_virtual_stages(9);
  EXPECT_TRUE(EngineModelErrors(c, *model).empty());
}

}  // namespace
}  // namespace zeroshard
