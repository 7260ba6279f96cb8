#include "nn/batch.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TensorView View(void* data, DType dtype, std::vector<int64_t> shape) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.shape = std::move(shape);
  return v;
}

TEST(BatchTest, FindsTensorsByNameAndReportsRowsAndSignature) {
  std::vector<float> features(12);
  std::vector<int32_t> labels(4);
  Batch batch;
  batch.Add("features", View(features.data(), DType::kF32, {4, 3}));
  batch.Add("labels", View(labels.data(), DType::kI32, {4}));
  EXPECT_TRUE(batch.Validate().ok());
  EXPECT_EQ(batch.rows(), 4);
  EXPECT_EQ(batch.Signature(), "features:f32[4, 3] labels:i32[4]");
  ASSERT_TRUE(batch.Get("labels").ok());
  EXPECT_EQ(batch.Get("labels")->data, labels.data());
  EXPECT_EQ(batch.Find("targets"), nullptr);
  EXPECT_EQ(batch.Get("targets").status().message(), "the batch has no tensor 'targets' (it has: features, labels)");
}

TEST(BatchTest, ValidateNamesTheTensorWithOtherRows) {
  std::vector<float> a(8), b(9);
  Batch batch{{"a", View(a.data(), DType::kF32, {4, 2})}, {"b", View(b.data(), DType::kF32, {3, 3})}};
  const absl::Status s = batch.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "batch tensor 'b' is f32[3, 3], expected 4 rows on dimension 0 like 'a'");
}

TEST(BatchTest, ValidateRejectsEmptyDuplicateAndDataless) {
  EXPECT_EQ(Batch().Validate().message(), "the batch has no tensors");
  std::vector<float> a(4);
  Batch twice{{"a", View(a.data(), DType::kF32, {4})}, {"a", View(a.data(), DType::kF32, {4})}};
  EXPECT_EQ(twice.Validate().message(), "the batch has two tensors named 'a'");
  Batch dataless{{"a", View(nullptr, DType::kF32, {4})}};
  EXPECT_EQ(dataless.Validate().message(), "batch tensor 'a' has no data");
}

}  // namespace
}  // namespace zeroshard
