// Test helpers for kernels: seeded random inputs (the seed is printed so a
// failure can be replayed with ZS_TEST_SEED), NaN-poisoned outputs, typed
// host tensors, mixed-tolerance comparison against f64 references, and
// central finite differences.
#ifndef ZEROSHARD_KERNELS_TESTING_KERNEL_TEST_UTIL_H_
#define ZEROSHARD_KERNELS_TESTING_KERNEL_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/testing/test_seed.h"
#include "gtest/gtest.h"

namespace zeroshard::kernels::testing {

// The test's next seed: fixed per test, replayable with ZS_TEST_SEED
// (core/testing/test_seed.h).
using ::zeroshard::TestSeed;

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  std::vector<double> Uniform(int64_t n, double lo, double hi) {
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<double> v(n);
    for (auto& x : v) x = d(gen_);
    return v;
  }
  std::vector<int32_t> Ints(int64_t n, int32_t lo, int32_t hi_exclusive) {
    std::uniform_int_distribution<int32_t> d(lo, hi_exclusive - 1);
    std::vector<int32_t> v(n);
    for (auto& x : v) x = d(gen_);
    return v;
  }

 private:
  std::mt19937_64 gen_;
};

// Host storage of one dtype (f32, bf16 or f16) with f64 conversions.
class HostTensor {
 public:
  HostTensor(DType dtype, int64_t n) : dtype_(dtype), n_(n), bytes_(n * DTypeSize(dtype)) {}
  // Values rounded to dtype.
  static HostTensor From(DType dtype, const std::vector<double>& values) {
    HostTensor t(dtype, static_cast<int64_t>(values.size()));
    for (int64_t i = 0; i < t.n_; ++i) t.Set(i, values[i]);
    return t;
  }
  static HostTensor Poisoned(DType dtype, int64_t n) {
    HostTensor t(dtype, n);
    for (int64_t i = 0; i < n; ++i) t.Set(i, std::numeric_limits<double>::quiet_NaN());
    return t;
  }
  void Set(int64_t i, double v) {
    float f = static_cast<float>(v);
    if (dtype_ == DType::kF32) {
      std::memcpy(bytes_.data() + 4 * i, &f, 4);
    } else {
      uint16_t h = dtype_ == DType::kBF16 ? F32ToBF16(f) : F32ToF16(f);
      std::memcpy(bytes_.data() + 2 * i, &h, 2);
    }
  }
  double Get(int64_t i) const {
    if (dtype_ == DType::kF32) {
      float f;
      std::memcpy(&f, bytes_.data() + 4 * i, 4);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, bytes_.data() + 2 * i, 2);
    return dtype_ == DType::kBF16 ? BF16ToF32(h) : F16ToF32(h);
  }
  // The values as stored (after rounding), in f64.
  std::vector<double> Values() const {
    std::vector<double> v(n_);
    for (int64_t i = 0; i < n_; ++i) v[i] = Get(i);
    return v;
  }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  int64_t size() const { return n_; }
  DType dtype() const { return dtype_; }

 private:
  // 8-byte aligned storage for any dtype.
  struct AlignedBytes {
    explicit AlignedBytes(size_t n) : v((n + 7) / 8) {}
    unsigned char* data() { return reinterpret_cast<unsigned char*>(v.data()); }
    const unsigned char* data() const { return reinterpret_cast<const unsigned char*>(v.data()); }
    std::vector<uint64_t> v;
  };
  DType dtype_;
  int64_t n_;
  AlignedBytes bytes_;
};

// Relative rounding unit of a dtype (half an ulp at 1).
inline double Epsilon(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return 1.0 / 256;  // 8 significant bits
    case DType::kF16:
      return 1.0 / 2048;  // 11 significant bits
    default:
      return 1.0 / (1 << 24);
  }
}

// Every element must satisfy |actual - expected| <= atol + rtol * |expected|
// (NaN never does). Reports the number of failures and the first few.
inline void ExpectAllClose(const std::vector<double>& actual, const std::vector<double>& expected, double atol,
                           double rtol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    double tol = atol + rtol * std::fabs(expected[i]);
    bool ok = std::fabs(actual[i] - expected[i]) <= tol;  // false for NaN
    if (!ok) {
      if (bad < 5) {
        ADD_FAILURE() << what << "[" << i << "] = " << actual[i] << ", expected " << expected[i] << " (tol " << tol
                      << ")";
      }
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << actual.size() << " elements out of tolerance";
}

// Same dtype, size and bytes (NaN payloads included); reports the first
// differing element.
inline void ExpectBitwiseEqual(const HostTensor& actual, const HostTensor& expected, const std::string& what) {
  ASSERT_EQ(actual.dtype(), expected.dtype()) << what;
  ASSERT_EQ(actual.size(), expected.size()) << what;
  const size_t elem = DTypeSize(actual.dtype());
  const auto* a = static_cast<const unsigned char*>(actual.data());
  const auto* e = static_cast<const unsigned char*>(expected.data());
  for (int64_t i = 0; i < actual.size(); ++i) {
    if (std::memcmp(a + i * elem, e + i * elem, elem) != 0) {
      ADD_FAILURE() << what << "[" << i << "] = " << actual.Get(i) << ", expected bitwise " << expected.Get(i);
      return;
    }
  }
}

// d loss / d x[i] for every i by central differences with step h (f64).
inline std::vector<double> NumericGrad(std::vector<double>& x, const std::function<double()>& loss,
                                       double h = 1e-5) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double saved = x[i];
    x[i] = saved + h;
    double up = loss();
    x[i] = saved - h;
    double down = loss();
    x[i] = saved;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

inline double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// The compute dtypes, for parameterized tests.
inline std::string DTypeParamName(const ::testing::TestParamInfo<DType>& info) { return DTypeName(info.param); }

}  // namespace zeroshard::kernels::testing

#endif  // ZEROSHARD_KERNELS_TESTING_KERNEL_TEST_UTIL_H_
