#include "kernels/cast.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"
#include "kernels/context.h"
#include "kernels/testing/kernel_test_util.h"

namespace zeroshard::kernels {
namespace {

using testing::HostTensor;

// Cast must agree bit for bit with core/dtype.h's scalar conversions
// (HostTensor::From rounds with them), including inf, NaN and subnormals.
TEST(Cast, F32ToHalfAndBackIsBitExact) {
  testing::Rng rng(testing::TestSeed());
  std::vector<double> values = rng.Uniform(40000, -70000, 70000);
  std::vector<double> small = rng.Uniform(1000, -1e-6, 1e-6);  // f16 subnormals
  values.insert(values.end(), small.begin(), small.end());
  for (double special : {0.0, -0.0, 1.0 / 3, 65504.0, 65520.0, std::numeric_limits<double>::infinity(),
                         -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    values.push_back(special);
  }
  const int64_t n = static_cast<int64_t>(values.size());
  HostTensor f32 = HostTensor::From(DType::kF32, values);
  for (DType half : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(half));
    HostTensor out = HostTensor::Poisoned(half, n);
    ASSERT_TRUE(Cast(KernelContext::Cpu(), out.data(), half, f32.data(), DType::kF32, n).ok());
    HostTensor expected = HostTensor::From(half, f32.Values());
    for (int64_t i = 0; i < n; ++i) {
      uint16_t got, want;
      std::memcpy(&got, static_cast<const char*>(out.data()) + 2 * i, 2);
      std::memcpy(&want, static_cast<const char*>(expected.data()) + 2 * i, 2);
      ASSERT_EQ(got, want) << "element " << i << " = " << values[i];
    }
    HostTensor back = HostTensor::Poisoned(DType::kF32, n);
    ASSERT_TRUE(Cast(KernelContext::Cpu(), back.data(), DType::kF32, out.data(), half, n).ok());
    for (int64_t i = 0; i < n; ++i) {
      double want = expected.Get(i);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(back.Get(i))) << i;
      } else {
        ASSERT_EQ(back.Get(i), want) << "element " << i;
      }
    }
  }
}

TEST(Cast, Bf16ToF16GoesThroughF32) {
  HostTensor bf = HostTensor::From(DType::kBF16, {1.0, -2.5, 1e-7, 1e5, 3.140625});
  HostTensor f16 = HostTensor::Poisoned(DType::kF16, 5);
  ASSERT_TRUE(Cast(KernelContext::Cpu(), f16.data(), DType::kF16, bf.data(), DType::kBF16, 5).ok());
  EXPECT_EQ(f16.Get(0), 1.0);
  EXPECT_EQ(f16.Get(1), -2.5);
  EXPECT_EQ(f16.Get(2), F16ToF32(F32ToF16(static_cast<float>(bf.Get(2)))));
  EXPECT_TRUE(std::isinf(f16.Get(3)));  // 1e5 > f16 max
  EXPECT_EQ(f16.Get(4), 3.140625);
}

TEST(Cast, SameDtypeCopies) {
  HostTensor a = HostTensor::From(DType::kF32, {1, 2, 3});
  HostTensor b = HostTensor::Poisoned(DType::kF32, 3);
  ASSERT_TRUE(Cast(KernelContext::Cpu(), b.data(), DType::kF32, a.data(), DType::kF32, 3).ok());
  EXPECT_EQ(b.Values(), a.Values());
}

TEST(CastErrors, IntegerDtype) {
  float x[2] = {};
  absl::Status s = Cast(KernelContext::Cpu(), x, DType::kI32, x, DType::kF32, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "Cast (out_dtype): dtype i32, expected f32, bf16 or f16");
}

}  // namespace
}  // namespace zeroshard::kernels
