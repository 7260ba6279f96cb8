#include "kernels/accumulate.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/context.h"
#include "kernels/cpu/parallel.h"
#include "kernels/testing/kernel_test_util.h"

namespace zeroshard::kernels {
namespace {

using testing::HostTensor;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

class AccumulateTest : public ::testing::TestWithParam<DType> {};

// Every element is one f32 add of the exactly widened source value.
TEST_P(AccumulateTest, EachElementIsOneF32AddOfTheWidenedSource) {
  const DType dtype = GetParam();
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "ZS_TEST_SEED=" << seed);
  testing::Rng rng(seed);
  std::vector<double> src_values = rng.Uniform(5000, -300, 300);
  std::vector<double> small = rng.Uniform(500, -1e-6, 1e-6);  // f16 subnormals
  src_values.insert(src_values.end(), small.begin(), small.end());
  std::vector<double> dst_values = rng.Uniform(static_cast<int64_t>(src_values.size()), -1e4, 1e4);
  // Specials: inf and NaN in src, in dst, and inf - inf.
  const std::vector<std::pair<double, double>> specials = {
      {kInf, 1.0}, {-kInf, 1.0}, {kNaN, 1.0}, {1.0, kInf}, {1.0, kNaN}, {-kInf, kInf}, {0.0, -0.0}, {-0.0, -0.0}};
  for (const auto& [s, d] : specials) {
    src_values.push_back(s);
    dst_values.push_back(d);
  }
  const int64_t n = static_cast<int64_t>(src_values.size());
  HostTensor src = HostTensor::From(dtype, src_values);
  std::vector<float> dst(dst_values.begin(), dst_values.end());
  const std::vector<float> before = dst;
  ASSERT_TRUE(AccumulateInto(KernelContext::Cpu(), dst.data(), src.data(), dtype, n).ok());
  for (int64_t i = 0; i < n; ++i) {
    const float want = before[i] + static_cast<float>(src.Get(i));  // widening to f32 is exact
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(dst[i])) << "element " << i << " = " << dst[i];
    } else {
      ASSERT_EQ(Bits(dst[i]), Bits(want)) << "element " << i << ": " << dst[i] << " vs " << want;
    }
  }
  // The specials, spelled out.
  const int64_t k = n - static_cast<int64_t>(specials.size());
  EXPECT_EQ(dst[k + 0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(dst[k + 1], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(dst[k + 2]));
  EXPECT_EQ(dst[k + 3], std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(dst[k + 4]));
  EXPECT_TRUE(std::isnan(dst[k + 5]));
  EXPECT_FALSE(std::signbit(dst[k + 6]));  // 0 + -0 = +0
  EXPECT_TRUE(std::signbit(dst[k + 7]));   // -0 + -0 = -0
}

// Values a half type holds exactly, with the sums worked out by hand.
TEST_P(AccumulateTest, HandCheckedValues) {
  const DType dtype = GetParam();
  HostTensor src = HostTensor::From(dtype, {1.0, -2.5, 3.140625, 0.0078125, -448.0});
  std::vector<float> dst = {0.5f, 2.5f, 1.0f, -1.0f, 1000.0f};
  ASSERT_TRUE(AccumulateInto(KernelContext::Cpu(), dst.data(), src.data(), dtype, 5).ok());
  EXPECT_EQ(dst, (std::vector<float>{1.5f, 0.0f, 4.140625f, -0.9921875f, 552.0f}));
}

TEST_P(AccumulateTest, ThreadCountIndependent) {
  cpu::ScopedMinWorkPerThread force_threads(1);  // thread even this small input
  const DType dtype = GetParam();
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "ZS_TEST_SEED=" << seed);
  testing::Rng rng(seed);
  const int64_t n = 10007;
  HostTensor src = HostTensor::From(dtype, rng.Uniform(n, -10, 10));
  std::vector<double> start = rng.Uniform(n, -10, 10);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    std::vector<float> dst(start.begin(), start.end());
    ASSERT_TRUE(AccumulateInto(KernelContext::Cpu(threads), dst.data(), src.data(), dtype, n).ok());
    results.push_back(dst);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AccumulateTest, ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         testing::DTypeParamName);

TEST(Accumulate, InPlaceF32Doubles) {
  std::vector<float> x = {1.0f, -3.0f, 0.25f};
  ASSERT_TRUE(AccumulateInto(KernelContext::Cpu(), x.data(), x.data(), DType::kF32, 3).ok());
  EXPECT_EQ(x, (std::vector<float>{2.0f, -6.0f, 0.5f}));
}

TEST(Accumulate, ZeroElementsTouchNothing) {
  float dst = 7.0f;
  EXPECT_TRUE(AccumulateInto(KernelContext::Cpu(), nullptr, nullptr, DType::kBF16, 0).ok());
  uint16_t src = 0x3f80;  // bf16 1.0
  EXPECT_TRUE(AccumulateInto(KernelContext::Cpu(), &dst, &src, DType::kBF16, 0).ok());
  EXPECT_EQ(dst, 7.0f);
}

TEST(AccumulateErrors, NegativeCount) {
  float x[1] = {};
  absl::Status s = AccumulateInto(KernelContext::Cpu(), x, x, DType::kF32, -1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "AccumulateInto: n = -1, expected >= 0");
}

TEST(AccumulateErrors, NonFloatDtype) {
  float x[2] = {};
  int32_t ints[2] = {1, 2};
  absl::Status s = AccumulateInto(KernelContext::Cpu(), x, ints, DType::kI32, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "AccumulateInto (src_dtype): dtype i32, expected f32, bf16 or f16");
  EXPECT_EQ(x[0], 0.0f);
}

TEST(AccumulateErrors, NullPointers) {
  float x[2] = {};
  absl::Status s = AccumulateInto(KernelContext::Cpu(), nullptr, x, DType::kF32, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "AccumulateInto: dst is null");
  s = AccumulateInto(KernelContext::Cpu(), x, nullptr, DType::kF16, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "AccumulateInto: src is null");
}

}  // namespace
}  // namespace zeroshard::kernels
