// Replays the CUDA attention kernels (kernels/cuda/attention.cu) on the
// host: the same per-row functions, tile loads (every simulated thread's
// share) and loop bounds, block by block, and compares with the CPU
// attention. What this cannot check is the kernels' own indexing of blocks
// and threads; kernels/cuda/kernels_gpu_test.cc does on a GPU.
#include "kernels/attention_tiles.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/attention.h"
#include "kernels/context.h"
#include "kernels/float_types.h"
#include "kernels/testing/kernel_test_util.h"

namespace zeroshard::kernels {
namespace {

namespace at = attention_tiles;
using testing::ExpectAllClose;
using testing::HostTensor;

struct Shape {
  int64_t b, t, c, nh;
  int64_t hs() const { return c / nh; }
};

// The kernels' view of one (b, h): q/k/v rows of qkv (stride 3C) and rows
// of out/dout (stride C).
struct HeadRows {
  const Shape& s;
  int64_t b, h;
  template <typename P>
  P* Qkv(P* qkv, int which) const {
    return qkv + b * s.t * 3 * s.c + which * s.c + h * s.hs();
  }
  template <typename P>
  P* Rows(P* x) const {
    return x + b * s.t * s.c + h * s.hs();
  }
  int64_t RowValue(int64_t t) const { return (b * s.nh + h) * s.t + t; }
};

template <typename T, int kHs>
class Replay {
 public:
  explicit Replay(const Shape& s) : s_(s), scale_(1.0f / std::sqrt(static_cast<float>(s.hs()))) {}

  void Forward(T* out, float* lse, const T* qkv) const {
    ForEachBlock([&](const HeadRows& hd, int64_t row0, int64_t last_row) {
      std::vector<at::ForwardRow<kHs>> rows(at::kRowsPerBlock);
      for (int x = 0; x < at::kRowsPerBlock; ++x) {
        at::ForwardRowBegin(rows[x]);
        if (row0 + x < s_.t) at::LoadRow<kHs>(rows[x].q, hd.Qkv(qkv, 0) + (row0 + x) * 3 * s_.c, s_.hs());
      }
      ForEachKeyTile(hd, qkv, last_row, [&](const float* k_tile, const float* v_tile, int64_t k0) {
        for (int x = 0; x < at::kRowsPerBlock && row0 + x < s_.t; ++x) {
          at::ForwardRowTile(rows[x], k_tile, v_tile, k0, row0 + x, scale_);
        }
      });
      for (int x = 0; x < at::kRowsPerBlock && row0 + x < s_.t; ++x) {
        const int64_t t = row0 + x;
        lse[hd.RowValue(t)] = at::ForwardRowEnd(rows[x]);
        at::StoreRow<kHs>(hd.Rows(out) + t * s_.c, rows[x].o, s_.hs());
      }
    });
  }

  void Backward(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse) const {
    std::vector<float> d(s_.b * s_.nh * s_.t);
    ForEachBlock([&](const HeadRows& hd, int64_t row0, int64_t) {
      for (int x = 0; x < at::kRowsPerBlock && row0 + x < s_.t; ++x) {
        const int64_t t = row0 + x;
        d[hd.RowValue(t)] = at::RowDot(hd.Rows(dout) + t * s_.c, hd.Rows(out) + t * s_.c, s_.hs());
      }
    });
    ForEachBlock([&](const HeadRows& hd, int64_t row0, int64_t last_row) {
      QueryGrads(hd, row0, last_row, dqkv, dout, qkv, lse, d.data());
      KeyValueGrads(hd, row0, dqkv, dout, qkv, lse, d.data());
    });
  }

 private:
  // f(head, first row, last row) for every block of the kernels' grid.
  template <typename F>
  void ForEachBlock(F&& f) const {
    for (int64_t bh = 0; bh < s_.b * s_.nh; ++bh) {
      const HeadRows hd{s_, bh / s_.nh, bh % s_.nh};
      for (int64_t row0 = 0; row0 < s_.t; row0 += at::kRowsPerBlock) {
        f(hd, row0, std::min<int64_t>(row0 + at::kRowsPerBlock, s_.t) - 1);
      }
    }
  }

  // As the kernels' ForEachKeyTile: every simulated thread's share of each
  // K and V tile, then f(k_tile, v_tile, k0).
  template <typename F>
  void ForEachKeyTile(const HeadRows& hd, const T* qkv, int64_t last_row, F&& f) const {
    std::vector<float> k_tile(at::kTileRows * kHs), v_tile(at::kTileRows * kHs);
    for (int64_t k0 = 0; k0 <= last_row; k0 += at::kTileRows) {
      for (int x = 0; x < at::kRowsPerBlock; ++x) {
        at::LoadTileShare<kHs>(k_tile.data(), hd.Qkv(qkv, 1), 3 * s_.c, k0, s_.t, s_.hs(), x, at::kRowsPerBlock);
        at::LoadTileShare<kHs>(v_tile.data(), hd.Qkv(qkv, 2), 3 * s_.c, k0, s_.t, s_.hs(), x, at::kRowsPerBlock);
      }
      f(k_tile.data(), v_tile.data(), k0);
    }
  }

  void QueryGrads(const HeadRows& hd, int64_t row0, int64_t last_row, T* dqkv, const T* dout, const T* qkv,
                  const float* lse, const float* d) const {
    std::vector<at::QueryGradRow<kHs>> rows(at::kRowsPerBlock);
    for (int x = 0; x < at::kRowsPerBlock && row0 + x < s_.t; ++x) {
      const int64_t t = row0 + x;
      at::Zero<kHs>(rows[x].dq);
      at::LoadRow<kHs>(rows[x].q, hd.Qkv(qkv, 0) + t * 3 * s_.c, s_.hs());
      at::LoadRow<kHs>(rows[x].dout, hd.Rows(dout) + t * s_.c, s_.hs());
      rows[x].lse = lse[hd.RowValue(t)];
      rows[x].d = d[hd.RowValue(t)];
    }
    ForEachKeyTile(hd, qkv, last_row, [&](const float* k_tile, const float* v_tile, int64_t k0) {
      for (int x = 0; x < at::kRowsPerBlock && row0 + x < s_.t; ++x) {
        at::QueryGradRowTile(rows[x], k_tile, v_tile, k0, row0 + x, scale_);
      }
    });
    for (int x = 0; x < at::kRowsPerBlock && row0 + x < s_.t; ++x) {
      at::Scale<kHs>(rows[x].dq, scale_);
      at::StoreRow<kHs>(hd.Qkv(dqkv, 0) + (row0 + x) * 3 * s_.c, rows[x].dq, s_.hs());
    }
  }

  void KeyValueGrads(const HeadRows& hd, int64_t row0, T* dqkv, const T* dout, const T* qkv, const float* lse,
                     const float* d) const {
    std::vector<float> q_tile(at::kTileRows * kHs), dout_tile(at::kTileRows * kHs);
    std::vector<float> lse_tile(at::kTileRows), d_tile(at::kTileRows);
    std::vector<at::KeyGradRow<kHs>> krows(at::kRowsPerBlock);
    std::vector<at::ValueGradRow<kHs>> vrows(at::kRowsPerBlock);
    for (int x = 0; x < at::kRowsPerBlock && row0 + x < s_.t; ++x) {
      const int64_t j = row0 + x;
      at::Zero<kHs>(krows[x].dk);
      at::Zero<kHs>(vrows[x].dv);
      at::LoadRow<kHs>(krows[x].k, hd.Qkv(qkv, 1) + j * 3 * s_.c, s_.hs());
      at::LoadRow<kHs>(krows[x].v, hd.Qkv(qkv, 2) + j * 3 * s_.c, s_.hs());
      at::LoadRow<kHs>(vrows[x].k, hd.Qkv(qkv, 1) + j * 3 * s_.c, s_.hs());
    }
    for (int64_t i0 = row0; i0 < s_.t; i0 += at::kTileRows) {
      for (int x = 0; x < at::kRowsPerBlock; ++x) {
        at::LoadTileShare<kHs>(q_tile.data(), hd.Qkv(qkv, 0), 3 * s_.c, i0, s_.t, s_.hs(), x, at::kRowsPerBlock);
        at::LoadTileShare<kHs>(dout_tile.data(), hd.Rows(dout), s_.c, i0, s_.t, s_.hs(), x, at::kRowsPerBlock);
        at::LoadRowValuesShare(lse_tile.data(), lse + hd.RowValue(0), i0, s_.t, x, at::kRowsPerBlock);
        at::LoadRowValuesShare(d_tile.data(), d + hd.RowValue(0), i0, s_.t, x, at::kRowsPerBlock);
      }
      for (int x = 0; x < at::kRowsPerBlock && row0 + x < s_.t; ++x) {
        const int64_t j = row0 + x;
        at::KeyGradRowTile(krows[x], q_tile.data(), dout_tile.data(), lse_tile.data(), d_tile.data(), i0, j, s_.t,
                           scale_);
        at::ValueGradRowTile(vrows[x], q_tile.data(), dout_tile.data(), lse_tile.data(), i0, j, s_.t, scale_);
      }
    }
    for (int x = 0; x < at::kRowsPerBlock && row0 + x < s_.t; ++x) {
      const int64_t j = row0 + x;
      at::Scale<kHs>(krows[x].dk, scale_);
      at::StoreRow<kHs>(hd.Qkv(dqkv, 1) + j * 3 * s_.c, krows[x].dk, s_.hs());
      at::StoreRow<kHs>(hd.Qkv(dqkv, 2) + j * 3 * s_.c, vrows[x].dv, s_.hs());
    }
  }

  Shape s_;
  float scale_;
};

class AttentionTilesTest : public ::testing::TestWithParam<DType> {
 protected:
  template <typename T, int kHs>
  void Check(const Shape& s) {
    const DType dt = GetParam();
    SCOPED_TRACE(::testing::Message() << "b " << s.b << " t " << s.t << " c " << s.c << " nh " << s.nh << " padded "
                                      << kHs);
    ASSERT_EQ(at::PaddedHeadSize(s.hs()), kHs);
    testing::Rng rng(testing::TestSeed());
    HostTensor qkv = HostTensor::From(dt, rng.Uniform(s.b * s.t * 3 * s.c, -2, 2));
    HostTensor dout = HostTensor::From(dt, rng.Uniform(s.b * s.t * s.c, -1, 1));
    const int64_t rows = s.b * s.nh * s.t;

    HostTensor out = HostTensor::Poisoned(dt, s.b * s.t * s.c);
    std::vector<float> lse(rows, NAN), scratch(AttentionBackwardScratchElements(s.b, s.t, s.nh));
    ASSERT_TRUE(AttentionForward(KernelContext::Cpu(), out.data(), lse.data(), qkv.data(), s.b, s.t, s.c, s.nh, dt).ok());
    HostTensor dqkv = HostTensor::Poisoned(dt, s.b * s.t * 3 * s.c);
    ASSERT_TRUE(AttentionBackward(KernelContext::Cpu(), dqkv.data(), scratch.data(), dout.data(), qkv.data(),
                                  out.data(), lse.data(), s.b, s.t, s.c, s.nh, dt)
                    .ok());

    const Replay<T, kHs> replay(s);
    HostTensor tiled_out = HostTensor::Poisoned(dt, s.b * s.t * s.c);
    std::vector<float> tiled_lse(rows, NAN);
    replay.Forward(static_cast<T*>(tiled_out.data()), tiled_lse.data(), static_cast<const T*>(qkv.data()));
    HostTensor tiled_dqkv = HostTensor::Poisoned(dt, s.b * s.t * 3 * s.c);
    // Backward from the CPU forward's out and lse, so each half is compared alone.
    replay.Backward(static_cast<T*>(tiled_dqkv.data()), static_cast<const T*>(dout.data()),
                    static_cast<const T*>(qkv.data()), static_cast<const T*>(out.data()), lse.data());

    const double eps = testing::Epsilon(dt);
    ExpectAllClose(std::vector<double>(tiled_lse.begin(), tiled_lse.end()),
                   std::vector<double>(lse.begin(), lse.end()), 1e-5, 1e-5, "lse");
    ExpectAllClose(tiled_out.Values(), out.Values(), 1e-5 + 2 * eps, 1e-5 + 2 * eps, "out");
    // bf16: D = dout · out uses the rounded out on the tiled path.
    ExpectAllClose(tiled_dqkv.Values(), dqkv.Values(), 1e-4 + 16 * eps, 1e-4 + 16 * eps, "dqkv");
  }

  template <int kHs>
  void CheckAll(const Shape& s) {
    switch (GetParam()) {
      case DType::kF32:
        return Check<float, kHs>(s);
      case DType::kBF16:
        return Check<Bf16, kHs>(s);
      default:
        return Check<F16, kHs>(s);
    }
  }
};

// Rows that end mid-tile and mid-block, several blocks, each padded size.
TEST_P(AttentionTilesTest, MatchesCpuAttention) {
  CheckAll<32>({2, 70, 48, 2});   // hs 24
  CheckAll<32>({1, 32, 64, 2});   // hs 32, exactly one tile
  CheckAll<64>({1, 129, 128, 2}); // hs 64, three blocks, one row in the last
  CheckAll<128>({1, 40, 96, 1});  // hs 96
  CheckAll<128>({1, 7, 128, 1});  // hs 128, fewer rows than a tile
}

TEST(AttentionTiles, PaddedHeadSizes) {
  EXPECT_EQ(at::PaddedHeadSize(1), 32);
  EXPECT_EQ(at::PaddedHeadSize(32), 32);
  EXPECT_EQ(at::PaddedHeadSize(33), 64);
  EXPECT_EQ(at::PaddedHeadSize(64), 64);
  EXPECT_EQ(at::PaddedHeadSize(65), 128);
  EXPECT_EQ(at::PaddedHeadSize(128), 128);
  EXPECT_EQ(at::PaddedHeadSize(129), 0);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AttentionTilesTest, ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         testing::DTypeParamName);

}  // namespace
}  // namespace zeroshard::kernels
