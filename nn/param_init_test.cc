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


// TP=k initialisation equals the slices of the TP=1 tensor, bit for bit.
TEST(ParamInitTest, LocalSlicesOfEveryTpRankAreTheGlobalTensorsSlices) {
  ParamSpec spec = Normal("h.0.attn.c_attn.weight", 1, 0.02f);
  spec.shape = {6, 12};  // [C, 3C] with C = 4... split per q|k|v block
  spec.partition = Partition::Split(1, 3);
  std::vector<float> global(72);
  InitParam(spec, 11, global.data());
  for (int tp : {1, 2}) {
    for (int r = 0; r < tp; ++r) {
      SCOPED_TRACE(::testing::Message() << "tp " << tp << " rank " << r);
      absl::StatusOr<std::vector<int64_t>> local_shape = LocalShape(spec, tp);
      ASSERT_TRUE(local_shape.ok()) << local_shape.status();
      const int64_t cols = (*local_shape)[1];
      std::vector<float> local(6 * cols);
      InitLocalParamSlice(spec, 11, r, tp, 0, 6 * cols, local.data());
      for (int64_t row = 0; row < 6; ++row) {
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t block = c / (cols / 3), within = c % (cols / 3);
          const int64_t global_col = block * 4 + r * (4 / tp) + within;
          ASSERT_EQ(local[row * cols + c], global[row * 12 + global_col]) << "row " << row << " col " << c;
        }
      }
      // A sub-range gives the same values as the whole local tensor.
      std::vector<float> part(5);
      InitLocalParamSlice(spec, 11, r, tp, 3, 8, part.data());
      EXPECT_EQ(part, std::vector<float>(local.begin() + 3, local.begin() + 8));
    }
  }
}

}  // namespace
}  // namespace zeroshard
