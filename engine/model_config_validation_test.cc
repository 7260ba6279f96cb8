#include "engine/model_config_validation.h"

#include "engine/testing/toy_model.h"
#include "gtest/gtest.h"

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

TEST(EngineModelErrorsTest, OtherPoliciesNameNoUnits) {
  EngineConfig c;
  c.mutable_activation_checkpointing()->set_policy(ActivationCheckpointingConfig::EVERY_UNIT);
  EXPECT_TRUE(EngineModelErrors(c, *BuildToyModel(ToyModelConfig())).empty());
}

}  // namespace
}  // namespace zeroshard
