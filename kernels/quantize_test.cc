// Int8 block quantization on CPU against a reference written here in f64
// (the library is not called to build expectations): the scales and int8
// values bit for bit, the error bound, exact round trips, zero blocks, short
// last blocks, inf/NaN under both policies, bf16/f16 in and out, error
// feedback, the packed size, accumulation and thread-count independence.
#include "kernels/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/context.h"
#include "kernels/cpu/parallel.h"
#include "kernels/testing/kernel_test_util.h"

namespace zeroshard::kernels {
namespace {

using testing::HostTensor;

constexpr DType kDTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

int64_t Blocks(int64_t n, int64_t block) { return (n + block - 1) / block; }
int64_t ScalesAt(int64_t n) { return (n + 3) / 4 * 4; }  // the format: int8s, zero padding to 4 bytes

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// A packed buffer (4-byte aligned), poisoned so that unwritten bytes show.
class Packed {
 public:
  Packed(int64_t n, int64_t block)
      : n_(n), bytes_(ScalesAt(n) + 4 * Blocks(n, block)), words_(bytes_ / 4, 0xabababab) {}
  void* data() { return words_.data(); }
  const void* data() const { return words_.data(); }
  int64_t bytes() const { return bytes_; }
  int8_t q(int64_t i) const { return static_cast<int8_t>(byte(i)); }
  uint8_t byte(int64_t i) const { return reinterpret_cast<const uint8_t*>(words_.data())[i]; }
  float scale(int64_t b) const {
    float s;
    std::memcpy(&s, reinterpret_cast<const char*>(words_.data()) + ScalesAt(n_) + 4 * b, 4);
    return s;
  }
  bool operator==(const Packed& o) const { return words_ == o.words_; }

 private:
  int64_t n_, bytes_;
  std::vector<uint32_t> words_;
};

// The f64 reference of one quantization: c = x (+ residual, one f32 add),
// amax in f64, scale = amax / 127 rounded once to f32 (as an f32 division
// rounds), q = c / scale rounded to nearest even in f64 and clamped; a
// block holding inf/NaN gets scale NaN and q = 0 (kPropagate).
struct Reference {
  std::vector<float> c, scale;
  std::vector<int> q;
};

Reference Quantize(const std::vector<double>& x, const std::vector<float>* residual, int64_t block) {
  const int64_t n = static_cast<int64_t>(x.size());
  Reference r;
  r.c.resize(n);
  r.q.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    r.c[i] = residual == nullptr ? static_cast<float>(x[i]) : static_cast<float>(x[i] + double{(*residual)[i]});
  }
  for (int64_t b = 0; b < Blocks(n, block); ++b) {
    const int64_t i0 = b * block, i1 = std::min(n, i0 + block);
    double amax = 0;
    bool finite = true;
    for (int64_t i = i0; i < i1; ++i) {
      amax = std::max(amax, std::fabs(double{r.c[i]}));
      finite = finite && std::isfinite(r.c[i]);
    }
    const float s = finite ? static_cast<float>(amax / 127.0) : std::numeric_limits<float>::quiet_NaN();
    r.scale.push_back(s);
    for (int64_t i = i0; i < i1; ++i) {
      r.q[i] = !finite || s == 0 ? 0 : static_cast<int>(std::clamp(std::nearbyint(r.c[i] / double{s}), -127.0, 127.0));
    }
  }
  return r;
}

// Values of varied magnitude: block b is scaled by 2^(b % 9 - 4), so
// neighbouring blocks get different scales.
std::vector<double> VariedValues(testing::Rng& rng, int64_t n, int64_t block) {
  std::vector<double> x = rng.Uniform(n, -3, 3);
  for (int64_t i = 0; i < n; ++i) x[i] = std::ldexp(x[i], static_cast<int>((i / block) % 9) - 4);
  return x;
}

// The packed bytes are the reference's: every scale and int8 value bitwise,
// the padding zero (a NaN scale only as NaN). For finite scales also the bound |c - q * scale| <=
// scale / 2, in exact (f64) arithmetic, with no allowance: the kernel rounds
// the exact quotient, so the f32 roundings leave no slack to allow for
// (one f32 ulp of the scale would be the allowance otherwise).
void ExpectPackedIs(const Packed& p, const Reference& ref, int64_t block) {
  const int64_t n = static_cast<int64_t>(ref.q.size());
  ASSERT_EQ(p.bytes(), ScalesAt(n) + 4 * Blocks(n, block));
  for (int64_t b = 0; b < Blocks(n, block); ++b) {
    if (std::isnan(ref.scale[b])) {
      ASSERT_TRUE(std::isnan(p.scale(b))) << "scale of block " << b << ": " << p.scale(b) << ", expected NaN";
    } else {
      ASSERT_EQ(Bits(p.scale(b)), Bits(ref.scale[b]))
          << "scale of block " << b << ": " << p.scale(b) << " vs " << ref.scale[b];
    }
  }
  int64_t bad = 0;
  double worst = 0;  // the largest error in units of the scale
  for (int64_t i = 0; i < n; ++i) {
    if (p.q(i) != ref.q[i] && bad++ < 5) {
      ADD_FAILURE() << "q[" << i << "] = " << int{p.q(i)} << ", expected " << ref.q[i];
    }
    const double s = ref.scale[i / block];
    const double err = std::fabs(double{ref.c[i]} - p.q(i) * s);
    if (s > 0) worst = std::max(worst, err / s);
    if (s == 0) {
      EXPECT_EQ(p.q(i), 0);
    }
  }
  EXPECT_EQ(bad, 0) << bad << " int8 values differ";
  EXPECT_LE(worst, 0.5) << "largest |c - q * scale| / scale";
  for (int64_t i = n; i < ScalesAt(n); ++i) EXPECT_EQ(p.byte(i), 0) << "padding byte " << i;
}

// Dequantized output is q * scale rounded once to f32, then (HostTensor::From)
// once more to the output dtype: the same two roundings the contract names.
std::vector<double> ExpectedDequant(const Packed& p, int64_t n, int64_t block, DType dt) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(p.q(i) * double{p.scale(i / block)});
  return HostTensor::From(dt, v).Values();
}

void ExpectSameValues(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool same = (std::isnan(got[i]) && std::isnan(want[i])) || got[i] == want[i];
    if (!same && bad++ < 5) {
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", expected " << want[i];
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " differ";
}

class QuantizeTest : public ::testing::TestWithParam<DType> {
 protected:
  testing::Rng rng_{testing::TestSeed()};
  const KernelContext cpu_ = KernelContext::Cpu();
};

TEST(Int8PackedBytes, Formula) {
  EXPECT_EQ(Int8PackedBytes(0, 32), 0);
  EXPECT_EQ(Int8PackedBytes(1, 32), 4 + 4);
  EXPECT_EQ(Int8PackedBytes(4, 4), 4 + 4);
  EXPECT_EQ(Int8PackedBytes(5, 2), 8 + 3 * 4);
  EXPECT_EQ(Int8PackedBytes(64, 32), 64 + 2 * 4);
  EXPECT_EQ(Int8PackedBytes(2 * 2048 + 5, 2048), 4104 + 3 * 4);
  EXPECT_EQ(Int8PackedBytes(100, 2048), 100 + 4);
  EXPECT_EQ(Int8PackedBytes(7, 1), 8 + 7 * 4);
  EXPECT_EQ(Int8PackedBytes(-1, 32), -1);
  EXPECT_EQ(Int8PackedBytes(10, 0), -1);
}

// Scales, values and the error bound against the reference, for blocks of
// several sizes with a short last block (and n < block), then every output
// dtype of the dequantization.
TEST_P(QuantizeTest, MatchesReferenceWithinHalfAScale) {
  const DType dt = GetParam();
  struct Shape {
    int64_t n, block;
  };
  for (const Shape shape :
       {Shape{2 * 2048 + 5, 2048}, Shape{100, 2048}, Shape{1000, 32}, Shape{33, 32}, Shape{37, 5}, Shape{3, 1}}) {
    const int64_t n = shape.n, block = shape.block;
    SCOPED_TRACE(::testing::Message() << "n " << n << " block " << block);
    HostTensor x = HostTensor::From(dt, VariedValues(rng_, n, block));
    Packed p(n, block);
    ASSERT_TRUE(QuantizeInt8Blocks(cpu_, p.data(), x.data(), dt, n, block, NonFiniteInput::kReject).ok());
    ExpectPackedIs(p, Quantize(x.Values(), nullptr, block), block);
    for (DType out_dt : kDTypes) {
      HostTensor out = HostTensor::Poisoned(out_dt, n);
      ASSERT_TRUE(DequantizeInt8Blocks(cpu_, out.data(), out_dt, p.data(), n, block).ok());
      ExpectSameValues(out.Values(), ExpectedDequant(p, n, block, out_dt), DTypeName(out_dt));
    }
  }
}

// Values k * s (integers k in [-127, 127], s a power of two, 127 * s in the
// block) come back exactly: scale == s, q == k, in every output dtype.
TEST_P(QuantizeTest, RepresentableValuesRoundTripExactly) {
  const DType dt = GetParam();
  const int64_t block = 64, n = 4 * block - 9;
  const int exponents[] = {-6, 0, 3, -10};  // one per block; k * 2^-10 is still a normal f16
  std::vector<double> values(n);
  std::vector<int32_t> k = rng_.Ints(n, -127, 128);
  for (int64_t b = 0; b < Blocks(n, block); ++b) k[b * block + b] = b % 2 == 0 ? 127 : -127;
  for (int64_t i = 0; i < n; ++i) values[i] = std::ldexp(k[i], exponents[i / block]);
  HostTensor x = HostTensor::From(dt, values);
  ASSERT_EQ(x.Values(), values);  // representable in dt
  Packed p(n, block);
  ASSERT_TRUE(QuantizeInt8Blocks(cpu_, p.data(), x.data(), dt, n, block, NonFiniteInput::kReject).ok());
  for (int64_t b = 0; b < Blocks(n, block); ++b) EXPECT_EQ(p.scale(b), std::ldexp(1.0, exponents[b])) << b;
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(p.q(i), k[i]) << i;
  for (DType out_dt : kDTypes) {
    HostTensor out = HostTensor::Poisoned(out_dt, n);
    ASSERT_TRUE(DequantizeInt8Blocks(cpu_, out.data(), out_dt, p.data(), n, block).ok());
    EXPECT_EQ(out.Values(), values) << DTypeName(out_dt);
  }
}

// Exact ties (k + 1/2) * s round to the even neighbour, in both signs.
TEST_P(QuantizeTest, TiesRoundToEven) {
  const DType dt = GetParam();
  const double s = 1.0 / 16;
  const double halves[] = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 125.5, 126.5, -126.5, 64.5};
  const int want[] = {0, 2, 2, 0, -2, -2, 126, 126, -126, 64};
  std::vector<double> values = {127 * s};  // the block's amax: scale == s
  for (double h : halves) values.push_back(h * s);
  HostTensor x = HostTensor::From(dt, values);
  ASSERT_EQ(x.Values(), values);
  const int64_t n = static_cast<int64_t>(values.size());
  Packed p(n, 32);
  ASSERT_TRUE(QuantizeInt8Blocks(cpu_, p.data(), x.data(), dt, n, 32, NonFiniteInput::kReject).ok());
  ASSERT_EQ(p.scale(0), s);
  for (int64_t i = 1; i < n; ++i) EXPECT_EQ(p.q(i), want[i - 1]) << values[i] / s;
}

// q is the nearest integer to the exact quotient c / scale: values just
// below a half-integer multiple of the scale, where an f32 quotient rounds up
// onto the half-integer (checked here) and would then round to the even
// neighbour above, the wrong one.
TEST(Quantize, RoundsTheExactQuotient) {
  const KernelContext cpu = KernelContext::Cpu();
  const float amax = 100.3f, s = amax / 127.0f;
  std::vector<float> x = {amax};
  std::vector<int> want = {127};
  for (int k = 0; k < 127; ++k) {
    const double tie = (k + 0.5) * double{s};
    float c = static_cast<float>(tie);
    if (c >= tie) c = std::nextafter(c, 0.0f);  // the largest f32 below the tie
    if (c / s == static_cast<float>(k + 0.5) && (k + 1) % 2 == 0) {
      x.push_back(c);
      want.push_back(k);
    }
  }
  ASSERT_GE(x.size(), 10u) << "too few cases where the f32 quotient lands on the tie";
  const int64_t n = static_cast<int64_t>(x.size());
  Packed p(n, n);
  ASSERT_TRUE(QuantizeInt8Blocks(cpu, p.data(), x.data(), DType::kF32, n, n, NonFiniteInput::kReject).ok());
  ASSERT_EQ(p.scale(0), s);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(p.q(i), want[i]) << "c = " << x[i] << ", c / scale = " << x[i] / double{s};
}

// A block of zeros (signed ones included) has scale +0 and q = 0 and
// dequantizes to exactly 0, next to ordinary blocks.
TEST_P(QuantizeTest, ZeroBlocks) {
  const DType dt = GetParam();
  const int64_t block = 32, n = 3 * block + 7;
  std::vector<double> values = rng_.Uniform(n, -1, 1);
  for (int64_t i = block; i < 2 * block; ++i) values[i] = i % 2 == 0 ? 0.0 : -0.0;
  for (int64_t i = 3 * block; i < n; ++i) values[i] = 0.0;  // the short last block too
  HostTensor x = HostTensor::From(dt, values);
  Packed p(n, block);
  ASSERT_TRUE(QuantizeInt8Blocks(cpu_, p.data(), x.data(), dt, n, block, NonFiniteInput::kReject).ok());
  ExpectPackedIs(p, Quantize(x.Values(), nullptr, block), block);
  EXPECT_EQ(Bits(p.scale(1)), 0u);
  EXPECT_EQ(Bits(p.scale(3)), 0u);
  for (DType out_dt : kDTypes) {
    HostTensor out = HostTensor::Poisoned(out_dt, n);
    ASSERT_TRUE(DequantizeInt8Blocks(cpu_, out.data(), out_dt, p.data(), n, block).ok());
    const std::vector<double> v = out.Values();
    for (int64_t i = block; i < 2 * block; ++i) ASSERT_EQ(v[i], 0.0) << i;
    for (int64_t i = 3 * block; i < n; ++i) ASSERT_EQ(v[i], 0.0) << i;
  }
}

// kReject names the first non-finite element, its value and its block, and
// leaves the residual untouched.
TEST_P(QuantizeTest, RejectsInfAndNaNWithTheirPlace) {
  const DType dt = GetParam();
  const int64_t n = 4096, block = 1024;
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    std::vector<std::pair<int64_t, double>> bad;
    std::string message;
  };
  const Case cases[] = {
      {{{17, inf}}, "quantize: element 17 of 4096 is inf (block 0); int8 quantization needs finite values"},
      {{{3000, nan}}, "quantize: element 3000 of 4096 is nan (block 2); int8 quantization needs finite values"},
      {{{4095, -inf}}, "quantize: element 4095 of 4096 is -inf (block 3); int8 quantization needs finite values"},
      {{{2100, inf}, {1500, nan}, {3000, -inf}},
       "quantize: element 1500 of 4096 is nan (block 1); int8 quantization needs finite values"},
  };
  for (const Case& c : cases) {
    std::vector<double> values = rng_.Uniform(n, -1, 1);
    for (const auto& [i, v] : c.bad) values[i] = v;
    HostTensor x = HostTensor::From(dt, values);
    Packed p(n, block);
    const absl::Status s = QuantizeInt8Blocks(cpu_, p.data(), x.data(), dt, n, block, NonFiniteInput::kReject);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), c.message);
    std::vector<float> residual(n, 0.25f);
    const absl::Status s2 =
        QuantizeInt8Blocks(cpu_, p.data(), x.data(), dt, n, block, NonFiniteInput::kReject, residual.data());
    EXPECT_EQ(s2.message(), c.message);
    EXPECT_EQ(residual, std::vector<float>(n, 0.25f));
  }
  // A finite input that the residual takes out of range: the compensated value is named.
  if (dt == DType::kF32) {
    std::vector<float> x(64, 1.0f), residual(64, 0.0f);
    x[40] = residual[40] = std::numeric_limits<float>::max();
    Packed p(64, 32);
    const absl::Status s =
        QuantizeInt8Blocks(cpu_, p.data(), x.data(), dt, 64, 32, NonFiniteInput::kReject, residual.data());
    EXPECT_EQ(s.message(), "quantize: element 40 of 64 is inf (block 1); int8 quantization needs finite values");
  }
}

// kPropagate: exactly the blocks holding inf/NaN get scale NaN and q = 0 (so
// NaN when dequantized, in every dtype) and keep their residual; the other
// blocks are as without them.
TEST_P(QuantizeTest, PropagatesNaNToExactlyItsBlock) {
  const DType dt = GetParam();
  const int64_t block = 256, n = 5 * block + 3;
  std::vector<double> values = VariedValues(rng_, n, block);
  values[block + 7] = std::numeric_limits<double>::quiet_NaN();
  values[3 * block + 200] = -std::numeric_limits<double>::infinity();
  values[5 * block + 2] = std::numeric_limits<double>::infinity();  // in the short last block
  HostTensor x = HostTensor::From(dt, values);
  const std::vector<float> residual0 = [&] {
    std::vector<double> r = rng_.Uniform(n, -1e-3, 1e-3);
    return std::vector<float>(r.begin(), r.end());
  }();
  std::vector<float> residual = residual0;
  Packed p(n, block);
  ASSERT_TRUE(
      QuantizeInt8Blocks(cpu_, p.data(), x.data(), dt, n, block, NonFiniteInput::kPropagate, residual.data()).ok());
  const Reference ref = Quantize(x.Values(), &residual0, block);
  const auto non_finite = [&](int64_t b) { return b == 1 || b == 3 || b == 5; };
  for (int64_t b = 0; b < Blocks(n, block); ++b) {
    SCOPED_TRACE(::testing::Message() << "block " << b);
    if (non_finite(b)) {
      EXPECT_TRUE(std::isnan(p.scale(b)));
    } else {
      EXPECT_EQ(Bits(p.scale(b)), Bits(ref.scale[b]));
    }
    for (int64_t i = b * block; i < std::min(n, (b + 1) * block); ++i) {
      ASSERT_EQ(p.q(i), non_finite(b) ? 0 : ref.q[i]) << i;
      if (non_finite(b)) {
        ASSERT_EQ(Bits(residual[i]), Bits(residual0[i])) << i;
      } else {
        ASSERT_EQ(residual[i],
                  static_cast<float>(ref.c[i] - double{static_cast<float>(ref.q[i] * double{ref.scale[b]})}))
            << i;
      }
    }
  }
  for (DType out_dt : kDTypes) {
    HostTensor out = HostTensor::Poisoned(out_dt, n);
    ASSERT_TRUE(DequantizeInt8Blocks(cpu_, out.data(), out_dt, p.data(), n, block).ok());
    const std::vector<double> v = out.Values();
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(std::isnan(v[i]), non_finite(i / block)) << DTypeName(out_dt) << " " << i;
  }
}

// residual is rewritten with c - q * scale (the f32 difference of the
// compensated value and the f32 dequantized value).
TEST_P(QuantizeTest, ResidualIsCompensatedMinusDequantized) {
  const DType dt = GetParam();
  const int64_t block = 128, n = 7 * block + 50;
  HostTensor x = HostTensor::From(dt, VariedValues(rng_, n, block));
  std::vector<double> r = rng_.Uniform(n, -0.01, 0.01);
  const std::vector<float> residual0(r.begin(), r.end());
  std::vector<float> residual = residual0;
  Packed p(n, block);
  ASSERT_TRUE(
      QuantizeInt8Blocks(cpu_, p.data(), x.data(), dt, n, block, NonFiniteInput::kReject, residual.data()).ok());
  const Reference ref = Quantize(x.Values(), &residual0, block);
  ExpectPackedIs(p, ref, block);
  for (int64_t i = 0; i < n; ++i) {
    const double dequant = static_cast<float>(ref.q[i] * double{ref.scale[i / block]});
    ASSERT_EQ(residual[i], static_cast<float>(ref.c[i] - dequant)) << i;
    ASSERT_LE(std::fabs(residual[i]), ref.scale[i / block] / 2.0 * (1 + 1e-6)) << i;
  }
}

// Quantizing the same vector again and again with error feedback: the sum of
// the dequantized values is T * x + residual_0 - residual_T, so the running
// mean converges to x (error 1/T of half a scale, plus the f32 rounding of
// x + residual each step) while without feedback it stays off by up to half
// a scale. The error does not accumulate: the running sum stays within a
// scale of T * x at every step.
TEST_P(QuantizeTest, ErrorFeedbackMeanConvergesToInput) {
  const DType dt = GetParam();
  const int64_t block = 64, n = 3 * block + 10, steps = 2000;
  HostTensor x = HostTensor::From(dt, VariedValues(rng_, n, block));
  const std::vector<double> xv = x.Values();
  std::vector<float> residual(n, 0.0f);
  std::vector<double> sum(n, 0.0), scale_of(n);
  Packed p(n, block);
  HostTensor out(DType::kF32, n);
  double worst_sum_error = 0;  // in scales
  for (int64_t t = 1; t <= steps; ++t) {
    ASSERT_TRUE(
        QuantizeInt8Blocks(cpu_, p.data(), x.data(), dt, n, block, NonFiniteInput::kReject, residual.data()).ok());
    ASSERT_TRUE(DequantizeInt8Blocks(cpu_, out.data(), DType::kF32, p.data(), n, block).ok());
    for (int64_t i = 0; i < n; ++i) {
      sum[i] += out.Get(i);
      scale_of[i] = p.scale(i / block);
      worst_sum_error = std::max(worst_sum_error, std::fabs(sum[i] - t * xv[i]) / scale_of[i]);
    }
  }
  EXPECT_LE(worst_sum_error, 1.0) << "running sum vs t * x, in scales";
  // Without feedback: the dequantized value itself, off by up to half a scale.
  Packed plain(n, block);
  ASSERT_TRUE(QuantizeInt8Blocks(cpu_, plain.data(), x.data(), dt, n, block, NonFiniteInput::kReject).ok());
  double worst_plain = 0, worst_mean = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double s = scale_of[i];
    const double mean_error = std::fabs(sum[i] / steps - xv[i]);
    // 1/T of half a scale, plus 2^-24 relative per step for the f32 add (x 2 margin).
    ASSERT_LE(mean_error, 2 * (s / (2 * steps) + std::ldexp(std::fabs(xv[i]) + s, -24))) << i;
    worst_mean = std::max(worst_mean, mean_error / s);
    worst_plain = std::max(worst_plain, std::fabs(plain.q(i) * s - xv[i]) / s);
  }
  EXPECT_GT(worst_plain, 0.25) << "the inputs are not all representable: the test would prove nothing";
  EXPECT_LT(worst_mean, worst_plain / 100);
}

// acc += q * scale: one f32 product and one f32 add per element; two chunks
// sum.
TEST(QuantizeAccumulate, AddsTheDequantizedValues) {
  testing::Rng rng(testing::TestSeed());
  const KernelContext cpu = KernelContext::Cpu();
  const int64_t block = 32, n = 5 * block + 1;
  const std::vector<double> av = rng.Uniform(n, -2, 2), bv = rng.Uniform(n, -0.1, 0.1);
  const std::vector<float> a(av.begin(), av.end()), b(bv.begin(), bv.end());
  Packed pa(n, block), pb(n, block);
  ASSERT_TRUE(QuantizeInt8Blocks(cpu, pa.data(), a.data(), DType::kF32, n, block, NonFiniteInput::kReject).ok());
  ASSERT_TRUE(QuantizeInt8Blocks(cpu, pb.data(), b.data(), DType::kF32, n, block, NonFiniteInput::kReject).ok());
  std::vector<double> init = rng.Uniform(n, -1, 1);
  std::vector<float> acc(init.begin(), init.end());
  const std::vector<float> acc0 = acc;
  ASSERT_TRUE(DequantizeInt8BlocksAccumulate(cpu, acc.data(), pa.data(), n, block).ok());
  ASSERT_TRUE(DequantizeInt8BlocksAccumulate(cpu, acc.data(), pb.data(), n, block).ok());
  for (int64_t i = 0; i < n; ++i) {
    const float da = static_cast<float>(pa.q(i) * double{pa.scale(i / block)});
    const float db = static_cast<float>(pb.q(i) * double{pb.scale(i / block)});
    const float want = static_cast<float>(static_cast<float>(acc0[i] + double{da}) + double{db});
    ASSERT_EQ(acc[i], want) << i;
  }
}

// Blocks split over threads; every element computed the same way.
TEST(Quantize, BitwiseIdenticalForAnyThreadCount) {
  cpu::ScopedMinWorkPerThread force_threads(1);
  testing::Rng rng(testing::TestSeed());
  const int64_t block = 32, n = 10000 + 7;
  for (DType dt : kDTypes) {
    SCOPED_TRACE(DTypeName(dt));
    HostTensor x = HostTensor::From(dt, VariedValues(rng, n, block));
    x.Set(5000, std::numeric_limits<double>::quiet_NaN());
    std::vector<double> r = rng.Uniform(n, -1e-3, 1e-3);
    const std::vector<float> residual0(r.begin(), r.end());
    Packed want_p(n, block);
    std::vector<float> want_r, want_acc;
    HostTensor want_out(dt, n);
    for (int threads : {1, 2, 3, 4}) {
      SCOPED_TRACE(::testing::Message() << threads << " threads");
      const KernelContext cpu = KernelContext::Cpu(threads);
      Packed p(n, block);
      std::vector<float> res = residual0, acc(n, 1.0f);
      ASSERT_TRUE(
          QuantizeInt8Blocks(cpu, p.data(), x.data(), dt, n, block, NonFiniteInput::kPropagate, res.data()).ok());
      HostTensor out(dt, n);
      ASSERT_TRUE(DequantizeInt8Blocks(cpu, out.data(), dt, p.data(), n, block).ok());
      ASSERT_TRUE(DequantizeInt8BlocksAccumulate(cpu, acc.data(), p.data(), n, block).ok());
      if (threads == 1) {
        want_p = p;
        want_r = res;
        want_acc = acc;
        want_out = out;
        continue;
      }
      EXPECT_TRUE(p == want_p);
      EXPECT_EQ(std::memcmp(res.data(), want_r.data(), 4 * n), 0);
      EXPECT_EQ(std::memcmp(acc.data(), want_acc.data(), 4 * n), 0);
      testing::ExpectBitwiseEqual(out, want_out, "dequantized");
    }
  }
}

TEST(Quantize, RejectsBadArguments) {
  const KernelContext cpu = KernelContext::Cpu();
  std::vector<float> x(64, 1.0f), out(64);
  Packed p(64, 32);
  const auto quantize = [&](void* packed, const void* in, DType dt, int64_t n, int64_t block) {
    return QuantizeInt8Blocks(cpu, packed, in, dt, n, block, NonFiniteInput::kReject);
  };
  EXPECT_EQ(quantize(p.data(), x.data(), DType::kF32, -1, 32).message(), "QuantizeInt8Blocks: n = -1, expected >= 0");
  EXPECT_EQ(quantize(p.data(), x.data(), DType::kF32, 64, 0).message(), "QuantizeInt8Blocks: block = 0, expected >= 1");
  EXPECT_EQ(quantize(p.data(), x.data(), DType::kI32, 64, 32).message(),
            "QuantizeInt8Blocks: dtype i32, expected f32, bf16 or f16");
  EXPECT_EQ(DequantizeInt8Blocks(cpu, out.data(), DType::kU16, p.data(), 64, 32).message(),
            "DequantizeInt8Blocks: dtype u16, expected f32, bf16 or f16");
  EXPECT_EQ(quantize(nullptr, x.data(), DType::kF32, 64, 32).message(), "QuantizeInt8Blocks: packed is null");
  EXPECT_EQ(quantize(p.data(), nullptr, DType::kF32, 64, 32).message(), "QuantizeInt8Blocks: in is null");
  EXPECT_EQ(DequantizeInt8BlocksAccumulate(cpu, nullptr, p.data(), 64, 32).message(),
            "DequantizeInt8BlocksAccumulate: acc is null");
  const absl::Status misaligned = quantize(static_cast<char*>(p.data()) + 2, x.data(), DType::kF32, 8, 32);
  EXPECT_EQ(misaligned.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(misaligned.message().find("not a multiple of 4"), std::string::npos) << misaligned.message();
  EXPECT_EQ(QuantizeInt8Blocks(cpu, p.data(), x.data(), DType::kF32, 64, 32, static_cast<NonFiniteInput>(7)).message(),
            "QuantizeInt8Blocks: non_finite = 7, expected kReject or kPropagate");
  // n = 0 is nothing to do (null pointers allowed).
  EXPECT_TRUE(quantize(nullptr, nullptr, DType::kF32, 0, 32).ok());
  EXPECT_TRUE(DequantizeInt8Blocks(cpu, nullptr, DType::kF32, nullptr, 0, 32).ok());
  EXPECT_TRUE(DequantizeInt8BlocksAccumulate(cpu, nullptr, nullptr, 0, 32).ok());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, QuantizeTest, ::testing::ValuesIn(kDTypes), testing::DTypeParamName);

}  // namespace
}  // namespace zeroshard::kernels
