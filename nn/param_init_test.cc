#include "nn/param_init.h"

#include <cmath>
#include <vector>

#include "core/testing/test_seed.h"
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
  const uint64_t seed = TestSeed();
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

// wte.weight with vocab 67 padded to 68 rows (tp 4): every real element has
// the value of the unpadded [67, C] tensor, padding is 0, on every tp rank
// and for every sub-range.
TEST(ParamInitTest, PaddingIsZeroAndRealElementsKeepTheirUnpaddedValues) {
  const int64_t v = 67, vp = 68, c = 5;
  ParamSpec unpadded = Normal("wte.weight", 1, 0.02f);
  unpadded.shape = {v, c};
  unpadded.partition = Partition::Split(0);
  ParamSpec padded = unpadded;
  padded.shape = {vp, c};
  padded.logical_shape = {v, c};
  std::vector<float> want(v * c), got(vp * c, NAN);
  InitParam(unpadded, 5, want.data());
  InitParam(padded, 5, got.data());
  EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + v * c), want);
  EXPECT_EQ(std::vector<float>(got.begin() + v * c, got.end()), std::vector<float>(c, 0.0f));
  for (int tp : {1, 2, 4}) {
    const int64_t rows = vp / tp;
    for (int r = 0; r < tp; ++r) {
      std::vector<float> local(rows * c, NAN);
      InitLocalParamSlice(padded, 5, r, tp, 0, rows * c, local.data());
      EXPECT_EQ(local, std::vector<float>(got.begin() + r * rows * c, got.begin() + (r + 1) * rows * c))
          << "tp " << tp << " rank " << r;
    }
  }
  std::vector<float> part(9, NAN);
  InitParamSlice(padded, 5, v * c - 4, v * c + 5, part.data());  // straddles the last real row
  EXPECT_EQ(part, std::vector<float>(got.begin() + v * c - 4, got.begin() + v * c + 5));
  // Constant initialisers leave padding 0 too.
  ParamSpec ones = padded;
  ones.init = InitKind::kOnes;
  InitParam(ones, 5, got.data());
  EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + v * c), std::vector<float>(v * c, 1.0f));
  EXPECT_EQ(std::vector<float>(got.begin() + v * c, got.end()), std::vector<float>(c, 0.0f));
}

// Padding inside a row: real elements are keyed by their logical index.
TEST(ParamInitTest, PaddedColumnsKeyRealElementsByTheirLogicalIndex) {
  ParamSpec unpadded = Normal("w", 1, 1.0f);
  unpadded.shape = {3, 2};
  ParamSpec padded = unpadded;
  padded.shape = {4, 3};
  padded.logical_shape = {3, 2};
  std::vector<float> want(6), got(12, NAN);
  InitParam(unpadded, 9, want.data());
  InitParam(padded, 9, got.data());
  EXPECT_EQ(got, (std::vector<float>{want[0], want[1], 0, want[2], want[3], 0, want[4], want[5], 0, 0, 0, 0}));
}

}  // namespace
}  // namespace zeroshard
