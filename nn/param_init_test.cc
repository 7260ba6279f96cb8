#include "nn/param_init.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

ParamSpec Normal(const std::string& name, int64_t n, float std) {
  ParamSpec p;
  p.name = name;
  p.shape = {n};
  p.init = InitKind::kNormal;
  p.init_std = std;
  return p;
}

TEST(ParamInitTest, NormalHasTheRequestedMomentsAndIsDeterministic) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const int64_t n = 200001;  // odd: the last element is half of a Box-Muller pair
  const ParamSpec spec = Normal("h.0.attn.c_attn.weight", n, 0.02f);
  std::vector<float> a(n), b(n);
  InitParam(spec, seed, a.data());
  InitParam(spec, seed, b.data());
  EXPECT_EQ(a, b);
  double sum = 0, sq = 0;
  for (float x : a) sum += x, sq += static_cast<double>(x) * x;
  const double mean = sum / n, stddev = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 5 * 0.02 / std::sqrt(n));
  EXPECT_NEAR(stddev, 0.02, 0.02 * 0.01);
}

TEST(ParamInitTest, SlicesEqualTheFullTensorBitwise) {
  const ParamSpec spec = Normal("wte.weight", 1001, 0.02f);
  std::vector<float> full(1001);
  InitParam(spec, 7, full.data());
  for (auto [begin, end] : std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 2}, {333, 667}, {999, 1001}, {5, 5}}) {
    std::vector<float> part(end - begin);
    InitParamSlice(spec, 7, begin, end, part.data());
    EXPECT_EQ(part, std::vector<float>(full.begin() + begin, full.begin() + end)) << begin << ".." << end;
  }
}

TEST(ParamInitTest, DependsOnSeedAndNameOnly) {
  std::vector<float> a(64), b(64), c(64), d(64);
  InitParam(Normal("h.0.mlp.c_fc.weight", 64, 0.02f), 1, a.data());
  InitParam(Normal("h.1.mlp.c_fc.weight", 64, 0.02f), 1, b.data());
  InitParam(Normal("h.0.mlp.c_fc.weight", 64, 0.02f), 2, c.data());
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  // Shape and std do not change the underlying stream: same name, larger std scales it.
  InitParam(Normal("h.0.mlp.c_fc.weight", 64, 0.04f), 1, d.data());
  for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(d[i], 2 * a[i]);
}

TEST(ParamInitTest, ZerosAndOnes) {
  ParamSpec z{"ln_1.bias", {5}, InitKind::kZeros, 0.0f};
  ParamSpec o{"ln_1.weight", {5}, InitKind::kOnes, 0.0f};
  std::vector<float> out(5, NAN);
  InitParam(z, 3, out.data());
  EXPECT_EQ(out, std::vector<float>(5, 0.0f));
  InitParam(o, 3, out.data());
  EXPECT_EQ(out, std::vector<float>(5, 1.0f));
}

}  // namespace
}  // namespace zeroshard
