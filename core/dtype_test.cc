// Exhaustive f16/bf16 conversion tests against a reference computed here in
// double precision from the formats' definitions (not from the code under test).
#include "core/dtype.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

// Value of a 16-bit pattern from the IEEE-style definition with the given
// exponent and mantissa widths (f16: 5/10, bf16: 8/7).
double RefDecode(uint16_t bits, int exp_bits, int mant_bits) {
  const int bias = (1 << (exp_bits - 1)) - 1;
  const int sign = bits >> 15;
  const int exp = (bits >> mant_bits) & ((1 << exp_bits) - 1);
  const int mant = bits & ((1 << mant_bits) - 1);
  double v;
  if (exp == (1 << exp_bits) - 1) {
    v = mant == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), 1 - bias - mant_bits);
  } else {
    v = std::ldexp(1.0 + std::ldexp(static_cast<double>(mant), -mant_bits), exp - bias);
  }
  return sign ? -v : v;
}

struct Format {
  DType dtype;
  int exp_bits;
  int mant_bits;
  float (*to_f32)(uint16_t);
  uint16_t (*from_f32)(float);
};

const Format kF16{DType::kF16, 5, 10, F16ToF32, F32ToF16};
const Format kBF16{DType::kBF16, 8, 7, BF16ToF32, F32ToBF16};

// Round-to-nearest-even reference: the non-negative finite patterns are
// increasing in value, so the answer is found by binary search on them.
class RefEncoder {
 public:
  explicit RefEncoder(const Format& f) : f_(f) {
    const uint16_t inf = static_cast<uint16_t>(((1 << f.exp_bits) - 1) << f.mant_bits);
    for (uint32_t b = 0; b < inf; ++b) values_.push_back(RefDecode(static_cast<uint16_t>(b), f.exp_bits, f.mant_bits));
    // Overflow threshold: halfway between the largest finite value and the
    // next power of two (what the next value would be with unlimited range).
    const double max = values_.back();
    const double ulp = max - values_[values_.size() - 2];
    overflow_ = max + ulp / 2;
    inf_ = inf;
  }

  uint16_t Encode(float x) const {
    if (std::isnan(x)) return 0;  // Not compared bit-exactly; callers check NaN-ness.
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double a = std::fabs(static_cast<double>(x));
    if (a >= overflow_) return sign | inf_;  // ties at the threshold go to inf (even).
    auto it = std::lower_bound(values_.begin(), values_.end(), a);
    size_t hi = it - values_.begin();
    if (hi < values_.size() && values_[hi] == a) return sign | static_cast<uint16_t>(hi);
    size_t lo = hi - 1;
    if (hi == values_.size()) return sign | static_cast<uint16_t>(lo);
    const double dlo = a - values_[lo], dhi = values_[hi] - a;
    size_t pick = dlo < dhi ? lo : (dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi));
    return sign | static_cast<uint16_t>(pick);
  }

  const std::vector<double>& values() const { return values_; }

 private:
  Format f_;
  std::vector<double> values_;
  double overflow_;
  uint16_t inf_;
};

class HalfConversionTest : public ::testing::TestWithParam<Format> {};

TEST_P(HalfConversionTest, AllBitPatternsDecodeExactlyAndRoundTrip) {
  const Format f = GetParam();
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const double ref = RefDecode(bits, f.exp_bits, f.mant_bits);
    const float got = f.to_f32(bits);
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << b;
      const uint16_t back = f.from_f32(got);
      ASSERT_TRUE(std::isnan(static_cast<double>(f.to_f32(back)))) << "NaN must stay NaN: " << std::hex << b;
      ASSERT_EQ(back & 0x8000, bits & 0x8000) << "NaN keeps its sign: " << std::hex << b;
      continue;
    }
    ASSERT_EQ(static_cast<double>(got), ref) << std::hex << b;
    ASSERT_EQ(std::signbit(got), (bits & 0x8000) != 0) << std::hex << b;
    ASSERT_EQ(f.from_f32(got), bits) << "round trip of " << std::hex << b;
  }
}

// Every midpoint between neighbouring representable values, the f32 values
// one ulp either side of it, and the overflow threshold.
TEST_P(HalfConversionTest, RoundsToNearestEvenAtEveryBoundary) {
  const Format f = GetParam();
  RefEncoder ref(f);
  const std::vector<double>& v = ref.values();
  int checked = 0;
  auto check = [&](float x) {
    for (float s : {x, -x}) {
      ASSERT_EQ(f.from_f32(s), ref.Encode(s)) << "input " << s << " bits " << std::hex << F32Bits(s);
      ++checked;
    }
  };
  for (size_t i = 0; i + 1 < v.size(); ++i) {
    const double mid = (v[i] + v[i + 1]) / 2;
    const float m = static_cast<float>(mid);  // Exact: f32 has more bits than either format.
    ASSERT_EQ(static_cast<double>(m), mid);
    check(m);
    check(std::nextafter(m, 0.0f));
    check(std::nextafter(m, std::numeric_limits<float>::infinity()));
  }
  const double top = v.back() + (v.back() - v[v.size() - 2]) / 2;
  const float t = static_cast<float>(top);
  if (static_cast<double>(t) == top) {
    check(t);
    check(std::nextafter(t, 0.0f));
  }
  check(std::numeric_limits<float>::infinity());
  check(std::numeric_limits<float>::max());
  check(std::numeric_limits<float>::denorm_min());
  EXPECT_GE(checked, static_cast<int>(6 * (v.size() - 1)));
}

TEST_P(HalfConversionTest, RandomF32InputsMatchReference) {
  const Format f = GetParam();
  RefEncoder ref(f);
  std::mt19937 rng(12345);
  for (int i = 0; i < 200000; ++i) {
    const float x = F32FromBits(rng());
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(f.to_f32(f.from_f32(x))));
      continue;
    }
    ASSERT_EQ(f.from_f32(x), ref.Encode(x)) << "bits " << std::hex << F32Bits(x);
  }
}

TEST_P(HalfConversionTest, BulkConversionMatchesScalar) {
  const Format f = GetParam();
  std::vector<float> in = {0.0f, -1.5f, 3.14159f, 1e-6f, 70000.0f, -0.0f};
  std::vector<uint16_t> half(in.size(), 0xdead);
  std::vector<float> out(in.size(), 123.0f);
  ConvertF32ToHalf(in.data(), half.data(), in.size(), f.dtype);
  ConvertHalfToF32(half.data(), out.data(), in.size(), f.dtype);
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(half[i], f.from_f32(in[i]));
    EXPECT_EQ(F32Bits(out[i]), F32Bits(f.to_f32(half[i])));
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, HalfConversionTest, ::testing::Values(kF16, kBF16),
                         [](const auto& info) { return std::string(DTypeName(info.param.dtype)); });

TEST(DTypeTest, KnownValues) {
  EXPECT_EQ(F32ToF16(1.0f), 0x3c00);
  EXPECT_EQ(F32ToF16(65504.0f), 0x7bff);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00);  // halfway to 2^16 rounds to inf
  EXPECT_EQ(F32ToF16(5.9604644775390625e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(F32ToBF16(1.0f), 0x3f80);
  EXPECT_EQ(F32ToBF16(F32FromBits(0x3f808000)), 0x3f80);  // tie, even stays
  EXPECT_EQ(F32ToBF16(F32FromBits(0x3f818000)), 0x3f82);  // tie, odd rounds up
}

TEST(DTypeTest, SizesNamesAndParsing) {
  EXPECT_EQ(DTypeSize(DType::kF32), 4u);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kU16), 2u);
  EXPECT_EQ(*ParseDType("bf16"), DType::kBF16);
  absl::StatusOr<DType> bad = ParseDType("fp8");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "unknown dtype 'fp8'; expected one of f32, f16, bf16, i32, u16, i8");
}

TEST(DTypeTest, I8IsOneSignedByte) {
  EXPECT_EQ(DTypeSize(DType::kI8), 1u);
  EXPECT_STREQ(DTypeName(DType::kI8), "i8");
  EXPECT_EQ(*ParseDType("i8"), DType::kI8);
  EXPECT_EQ(ParseDType("I8").status().code(), absl::StatusCode::kInvalidArgument);  // names are lower case
  // Every name parses back to its dtype.
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kU16, DType::kI8}) {
    EXPECT_EQ(*ParseDType(DTypeName(d)), d) << DTypeName(d);
  }
}

}  // namespace
}  // namespace zeroshard
