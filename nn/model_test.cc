#include "nn/model.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

// A unit that only declares parameters (Validate never runs it).
class DeclaringUnit : public NamedUnit {
 public:
  DeclaringUnit(std::string name, std::vector<ParamSpec> params, std::vector<std::string> borrowed = {})
      : NamedUnit(std::move(name)), borrowed_(std::move(borrowed)) {
    params_ = std::move(params);
  }
  std::vector<std::string> borrowed_params() const override { return borrowed_; }
  absl::Status Forward(const UnitContext&, absl::Span<const TensorView>, const Batch&, absl::Span<const TensorView>,
                       UnitOutput*, std::unique_ptr<SavedActivations>*) const override {
    return absl::OkStatus();
  }
  absl::Status Backward(const UnitContext&, absl::Span<const TensorView>, absl::Span<const TensorView>, const Batch&,
                        const SavedActivations&, absl::Span<const TensorView>, ActivationPack*) const override {
    return absl::OkStatus();
  }

 private:
  std::vector<std::string> borrowed_;
};

ParamSpec P(std::string name, std::vector<int64_t> shape) {
  ParamSpec p;
  p.name = std::move(name);
  p.shape = std::move(shape);
  return p;
}

Model Of(std::vector<std::unique_ptr<Unit>> units) {
  Model m;
  m.units = std::move(units);
  return m;
}

TEST(ModelTest, AUnitMustNotMixTrainableAndFrozenParameters) {
  ParamSpec frozen = P("a.b", {2});
  frozen.trainable = false;
  std::vector<std::unique_ptr<Unit>> units;
  units.push_back(std::make_unique<DeclaringUnit>("a", std::vector<ParamSpec>{P("a.w", {2, 2}), frozen}));
  const absl::Status s = Of(std::move(units)).Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "unit \"a\" mixes trainable and frozen parameters (a.w is trainable, a.b is frozen); put frozen parameters "
            "in a unit of their own");
}

TEST(ModelTest, OptimizerMultipliersAndPartitionsAreChecked) {
  ParamSpec slow = P("a.w", {4, 6});
  slow.lr_mult = 0;
  std::vector<std::unique_ptr<Unit>> units;
  units.push_back(std::make_unique<DeclaringUnit>("a", std::vector<ParamSpec>{slow}));
  EXPECT_EQ(Of(std::move(units)).Validate().message(),
            "parameter a.w has lr_mult 0 and weight_decay_mult unset, expected lr_mult > 0 and weight_decay_mult >= 0");
  ParamSpec split = P("a.w", {4, 6});
  split.partition = Partition::Split(1, 3);
  units.clear();
  units.push_back(std::make_unique<DeclaringUnit>("a", std::vector<ParamSpec>{split}));
  Model m = Of(std::move(units));
  EXPECT_TRUE(m.Validate(1).ok());
  EXPECT_TRUE(m.Validate(2).ok());
  EXPECT_EQ(m.Validate(4).message(),
            "parameter 'a.w' [4, 6] is split on dimension 1 in 3 block(s) over tp 4: 6 is not a multiple of 12");
}

TEST(ModelTest, PaddedShapesAreCheckedAndCountedBothWays) {
  ParamSpec padded = P("a.w", {8, 3});  // logical [6, 3], split over up to 8 ranks
  padded.logical_shape = {6, 3};
  padded.partition = Partition::Split(0);
  std::vector<std::unique_ptr<Unit>> units;
  units.push_back(std::make_unique<DeclaringUnit>("a", std::vector<ParamSpec>{padded, P("a.b", {3})}));
  Model m = Of(std::move(units));
  EXPECT_TRUE(m.Validate(4).ok());
  EXPECT_EQ(m.Validate(3).message(),
            "parameter 'a.w' [8, 3] is split on dimension 0 in 1 block(s) over tp 3: 8 is not a multiple of 3");
  EXPECT_EQ(m.num_params(), 27);
  EXPECT_EQ(m.num_logical_params(), 21);

  ParamSpec wrong = P("b.w", {8, 3});
  wrong.logical_shape = {6, 4};
  units.clear();
  units.push_back(std::make_unique<DeclaringUnit>("b", std::vector<ParamSpec>{wrong}));
  const absl::Status s = Of(std::move(units)).Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "parameter 'b.w' [8, 3] has logical shape [6, 4], expected as many dimensions, each in [1, the shape's]");
}

TEST(ModelTest, ABorrowedNameMayBeOwnedByALaterUnit) {
  std::vector<std::unique_ptr<Unit>> units;
  units.push_back(std::make_unique<DeclaringUnit>("first", std::vector<ParamSpec>{P("first.w", {2})},
                                                  std::vector<std::string>{"last.w"}));
  units.push_back(std::make_unique<DeclaringUnit>("last", std::vector<ParamSpec>{P("last.w", {2})}));
  Model m = Of(std::move(units));
  EXPECT_TRUE(m.Validate().ok());
  EXPECT_EQ(m.FindParam("last.w")->unit, 1);
}

TEST(ModelTest, IgnoredImportTensorsMatchExactNamesAndSuffixes) {
  Model m;
  m.ignored_import_tensors = {"lm_head.weight", "*.attn.bias"};
  EXPECT_TRUE(m.IgnoresImportTensor("lm_head.weight"));
  EXPECT_TRUE(m.IgnoresImportTensor("h.3.attn.bias"));
  EXPECT_FALSE(m.IgnoresImportTensor("h.3.attn.c_attn.bias"));
  EXPECT_FALSE(m.IgnoresImportTensor("lm_head.weight2"));
}

}  // namespace
}  // namespace zeroshard
