// The per-row arithmetic of tiled (flash-style) causal attention, written
// once for the CUDA kernels and for the host test that replays their tiling
// against the CPU attention (kernels/attention_tiles_test.cc).
//
// The kernels give each thread one row (a query row for the forward and dq,
// a key row for dk and dv) held in registers, and stream the other side
// through shared memory in tiles of kTileRows rows. Nothing T × T is ever
// stored: the forward keeps a running max and sum per row (online softmax)
// and saves the row's log-sum-exp; the backward recomputes each probability
// as exp(score - lse). Rows are zero-padded from hs to kHs (a supported
// padded head size), which only adds zero terms.
//
// Every output element has one writer that adds its terms in key (or query)
// order, so the kernels are run-to-run deterministic.
#ifndef ZEROSHARD_KERNELS_ATTENTION_TILES_H_
#define ZEROSHARD_KERNELS_ATTENTION_TILES_H_

#include <cmath>
#include <cstdint>

#include "kernels/float_types.h"
#include "kernels/pointwise_math.h"

// Every piece is force-inlined on the device so that a row's arrays stay in
// registers; loops over the head size are unrolled for the same reason.
#if defined(__CUDACC__)
#define ZS_UNROLL _Pragma("unroll")
#define ZS_TILE_FN __host__ __device__ __forceinline__
#else
#define ZS_UNROLL
#define ZS_TILE_FN inline
#endif

namespace zeroshard::kernels::attention_tiles {

inline constexpr int kRowsPerBlock = 64;  // rows per block, one per thread
inline constexpr int kTileRows = 32;      // rows of the other side per shared tile
inline constexpr int kMaxHeadSize = 128;

// The padded head size the kernels are instantiated for: 32, 64 or 128;
// 0 when hs is above kMaxHeadSize.
ZS_TILE_FN int PaddedHeadSize(int64_t hs) {
  return hs <= 32 ? 32 : hs <= 64 ? 64 : hs <= kMaxHeadSize ? kMaxHeadSize : 0;
}

template <int kHs>
ZS_TILE_FN void Zero(float* row) {
  ZS_UNROLL for (int i = 0; i < kHs; ++i) row[i] = 0.0f;
}

template <int kHs>
ZS_TILE_FN void Scale(float* row, float s) {
  ZS_UNROLL for (int i = 0; i < kHs; ++i) row[i] *= s;
}

template <int kHs>
ZS_TILE_FN float Dot(const float* a, const float* b) {
  float acc = 0.0f;
  ZS_UNROLL for (int i = 0; i < kHs; ++i) acc += a[i] * b[i];
  return acc;
}

// dst[0..kHs) = row[0..hs) as f32, zeros after.
template <int kHs, typename T>
ZS_TILE_FN void LoadRow(float* dst, const T* row, int64_t hs) {
  ZS_UNROLL for (int i = 0; i < kHs; ++i) dst[i] = i < hs ? Load(row[i]) : 0.0f;
}

template <int kHs, typename T>
ZS_TILE_FN void StoreRow(T* row, const float* src, int64_t hs) {
  ZS_UNROLL for (int i = 0; i < kHs; ++i) {
    if (i < hs) row[i] = Store<T>(src[i]);
  }
}

// One thread's share of loading rows [r0, r0 + kTileRows) of a strided
// (rows, hs) matrix into tile (kTileRows × kHs, f32): elements thread,
// thread + threads, ... Rows at or past `rows` and columns past hs are 0.
template <int kHs, typename T>
ZS_TILE_FN void LoadTileShare(float* tile, const T* base, int64_t ld, int64_t r0, int64_t rows,
                                         int64_t hs, int thread, int threads) {
  for (int e = thread; e < kTileRows * kHs; e += threads) {
    const int r = e / kHs, i = e % kHs;
    const int64_t row = r0 + r;
    tile[e] = row < rows && i < hs ? Load(base[row * ld + i]) : 0.0f;
  }
}

// The same for a vector of per-row values (lse, D): tile[r] = v[r0 + r].
ZS_TILE_FN void LoadRowValuesShare(float* tile, const float* v, int64_t r0, int64_t rows, int thread,
                                              int threads) {
  for (int r = thread; r < kTileRows; r += threads) tile[r] = r0 + r < rows ? v[r0 + r] : 0.0f;
}

// Forward state of query row t: running max m of its scores, running sum l
// of exp(score - m), and the unnormalised output o = sum exp(score - m) v.
template <int kHs>
struct ForwardRow {
  float q[kHs];
  float o[kHs];
  float m;
  float l;
};

template <int kHs>
ZS_TILE_FN void ForwardRowBegin(ForwardRow<kHs>& r) {
  r.m = -INFINITY;
  r.l = 0.0f;
  Zero<kHs>(r.o);
}

// Folds the keys k0 .. k0 + kTileRows - 1 of a K and a V tile into query row
// t; keys after t are masked. The running sums are rescaled only when the
// max grows (rarely after the first keys).
template <int kHs>
ZS_TILE_FN void ForwardRowTile(ForwardRow<kHs>& r, const float* k_tile, const float* v_tile, int64_t k0,
                                          int64_t t, float scale) {
  const int keys = t - k0 + 1 < kTileRows ? static_cast<int>(t - k0 + 1) : kTileRows;
  for (int j = 0; j < keys; ++j) {
    const float s = Dot<kHs>(r.q, k_tile + j * kHs) * scale;
    if (s > r.m) {
      const float corr = expf(r.m - s);  // 0 on the first key (m = -inf)
      r.l *= corr;
      Scale<kHs>(r.o, corr);
      r.m = s;
    }
    const float p = expf(s - r.m);
    r.l += p;
    const float* v = v_tile + j * kHs;
    ZS_UNROLL for (int i = 0; i < kHs; ++i) r.o[i] += p * v[i];
  }
}

// Normalises o in place and returns the row's log-sum-exp. Key 0 is always
// visible, so l >= 1.
template <int kHs>
ZS_TILE_FN float ForwardRowEnd(ForwardRow<kHs>& r) {
  Scale<kHs>(r.o, 1.0f / r.l);
  return r.m + logf(r.l);
}

// D = dout · out of one row: the softmax backward's sum_j p_j dp_j, since
// out = sum_j p_j v_j and dp_j = dout · v_j.
template <typename T>
ZS_TILE_FN float RowDot(const T* a, const T* b, int64_t hs) {
  float acc = 0.0f;
  for (int64_t i = 0; i < hs; ++i) acc += Load(a[i]) * Load(b[i]);
  return acc;
}

// The recomputed probability of one (query, key) pair. The backward's score
// grads ds = p (dp - D) are unscaled: callers multiply by `scale` once at
// the end.
ZS_TILE_FN float Probability(float dot, float scale, float lse) { return expf(dot * scale - lse); }

// dq of query row t: dq = scale · sum_{j <= t} ds_j k_j.
template <int kHs>
struct QueryGradRow {
  float q[kHs];
  float dout[kHs];
  float dq[kHs];
  float lse;
  float d;
};

template <int kHs>
ZS_TILE_FN void QueryGradRowTile(QueryGradRow<kHs>& r, const float* k_tile, const float* v_tile,
                                            int64_t k0, int64_t t, float scale) {
  const int keys = t - k0 + 1 < kTileRows ? static_cast<int>(t - k0 + 1) : kTileRows;
  for (int j = 0; j < keys; ++j) {
    const float* k = k_tile + j * kHs;
    const float p = Probability(Dot<kHs>(r.q, k), scale, r.lse);
    const float ds = SoftmaxInputGrad(p, Dot<kHs>(r.dout, v_tile + j * kHs), r.d);
    ZS_UNROLL for (int i = 0; i < kHs; ++i) r.dq[i] += ds * k[i];
  }
}

// The queries of a tile that see key j: i0 + r for r in [first, last).
struct VisibleQueries {
  int first;
  int last;
};

ZS_TILE_FN VisibleQueries QueriesSeeingKey(int64_t i0, int64_t j, int64_t t_len) {
  const int64_t first = j - i0 > 0 ? j - i0 : 0;
  const int64_t last = t_len - i0 < kTileRows ? t_len - i0 : kTileRows;
  return {static_cast<int>(first), static_cast<int>(last)};
}

// dk of key row j: dk = scale · sum_{i >= j} ds_i q_i.
template <int kHs>
struct KeyGradRow {
  float k[kHs];
  float v[kHs];
  float dk[kHs];
};

template <int kHs>
ZS_TILE_FN void KeyGradRowTile(KeyGradRow<kHs>& r, const float* q_tile, const float* dout_tile,
                                          const float* lse_tile, const float* d_tile, int64_t i0, int64_t j,
                                          int64_t t_len, float scale) {
  const VisibleQueries vis = QueriesSeeingKey(i0, j, t_len);
  for (int i = vis.first; i < vis.last; ++i) {
    const float* q = q_tile + i * kHs;
    const float p = Probability(Dot<kHs>(q, r.k), scale, lse_tile[i]);
    const float ds = SoftmaxInputGrad(p, Dot<kHs>(dout_tile + i * kHs, r.v), d_tile[i]);
    ZS_UNROLL for (int c = 0; c < kHs; ++c) r.dk[c] += ds * q[c];
  }
}

// dv of key row j: dv = sum_{i >= j} p_i dout_i.
template <int kHs>
struct ValueGradRow {
  float k[kHs];
  float dv[kHs];
};

template <int kHs>
ZS_TILE_FN void ValueGradRowTile(ValueGradRow<kHs>& r, const float* q_tile, const float* dout_tile,
                                            const float* lse_tile, int64_t i0, int64_t j, int64_t t_len,
                                            float scale) {
  const VisibleQueries vis = QueriesSeeingKey(i0, j, t_len);
  for (int i = vis.first; i < vis.last; ++i) {
    const float p = Probability(Dot<kHs>(q_tile + i * kHs, r.k), scale, lse_tile[i]);
    const float* dout = dout_tile + i * kHs;
    ZS_UNROLL for (int c = 0; c < kHs; ++c) r.dv[c] += p * dout[c];
  }
}

}  // namespace zeroshard::kernels::attention_tiles

#endif  // ZEROSHARD_KERNELS_ATTENTION_TILES_H_
