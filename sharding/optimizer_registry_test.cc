#include "sharding/optimizer_registry.h"

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(OptimizerRegistryTest, FindsRegisteredOptimizersByName) {
  for (const Optimizer* o : RegisteredOptimizers()) {
    absl::StatusOr<const Optimizer*> found = FindOptimizer(o->name());
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(*found, o);
    EXPECT_EQ(o->Defaults().name, o->name());
    EXPECT_TRUE(o->Validate(o->Defaults()).ok()) << o->name() << ": " << o->Validate(o->Defaults());
  }
}

TEST(OptimizerRegistryTest, UnknownNameListsTheRegisteredOnes) {
  absl::StatusOr<const Optimizer*> found = FindOptimizer("adam");
  EXPECT_EQ(found.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(found.status().message(), "unknown optimizer 'adam'; expected one of " + RegisteredOptimizerNames());
  EXPECT_EQ(RegisteredOptimizerNames().rfind("adamw, sgd", 0), 0u) << RegisteredOptimizerNames();
}

TEST(OptimizerRegistryTest, StateKindsAndBytesPerElement) {
  OptimizerOptions adamw;
  EXPECT_EQ(OptimizerStateBytesPerElement(adamw).value(), 8);
  OptimizerOptions sgd;
  sgd.name = "sgd";
  EXPECT_EQ(OptimizerStateBytesPerElement(sgd).value(), 0);
  sgd.momentum = 0.9f;
  EXPECT_EQ(OptimizerStateBytesPerElement(sgd).value(), 4);
  const std::vector<std::string> names = RegisteredStateCheckpointNames();
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 3),
            (std::vector<std::string>{"exp_avg", "exp_avg_sq", "momentum"}));
  OptimizerOptions lion;
  lion.name = "lion";
  EXPECT_EQ(OptimizerStateBytesPerElement(lion).value(), 4);
  EXPECT_EQ(FindOptimizer("lion").value()->Defaults().beta2, 0.99f);
  OptimizerOptions unknown;
  unknown.name = "rmsprop";
  EXPECT_EQ(OptimizerStateBytesPerElement(unknown).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zeroshard
