// Test helpers: f64 finite differences, random tensors, mixed-tolerance
// comparison, and f32 host tensors viewed as TensorViews.
#ifndef ZEROSHARD_NN_TESTING_GRAD_CHECK_H_
#define ZEROSHARD_NN_TESTING_GRAD_CHECK_H_

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/testing/test_seed.h"
#include "gtest/gtest.h"

namespace zeroshard::testing {

// The test's next seed: fixed per test, replayable with ZS_TEST_SEED
// (core/testing/test_seed.h).
using ::zeroshard::TestSeed;

inline std::vector<float> RandomFloats(std::mt19937& rng, size_t n, float stddev, float mean = 0.0f) {
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<double> ToDouble(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// d f / d x_i by central differences in f64, for every i.
inline std::vector<double> NumericalGradient(const std::function<double(const std::vector<double>&)>& f,
                                             std::vector<double> x, double h = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double plus = f(x);
    x[i] = saved - h;
    const double minus = f(x);
    x[i] = saved;
    g[i] = (plus - minus) / (2 * h);
  }
  return g;
}

// Every |actual - expected| <= atol + rtol * |expected| (llm.c's mixed tolerance).
inline void ExpectAllClose(const std::vector<float>& actual, const std::vector<double>& expected, double atol,
                           double rtol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double err = std::fabs(static_cast<double>(actual[i]) - expected[i]);
    if (!(err <= atol + rtol * std::fabs(expected[i]))) {
      if (++failures <= 5) {
        ADD_FAILURE() << what << "[" << i << "]: got " << actual[i] << ", expected " << expected[i] << " (error "
                      << err << ", tolerance " << atol + rtol * std::fabs(expected[i]) << ")";
      }
    }
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << actual.size() << " elements out of tolerance";
}

// A view of a host vector (f32 or i32) with the given shape.
inline TensorView HostView(std::vector<float>& v, std::vector<int64_t> shape) {
  return TensorView{v.data(), DType::kF32, std::move(shape), Device::kCpu};
}
inline TensorView HostView(std::vector<int32_t>& v, std::vector<int64_t> shape) {
  return TensorView{v.data(), DType::kI32, std::move(shape), Device::kCpu};
}

inline std::vector<float> Poisoned(size_t n) { return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()); }

}  // namespace zeroshard::testing

#endif  // ZEROSHARD_NN_TESTING_GRAD_CHECK_H_
