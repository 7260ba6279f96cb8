// Row loops of the softmax kernels, written so that they vectorise: a
// maximum and a sum of exponentials, each over eight interleaved lanes, and
// the cross-entropy gradient of a row. The lane split is fixed (element v
// goes to lane v % 8 and the tail comes last), so a row's result depends on
// the row alone, never on the thread count, the data's alignment or the
// vector ISA. Force-inlined so that callers compiled per ISA
// (kernels/cpu/vector_isa.h) vectorise them at theirs.
#ifndef ZEROSHARD_KERNELS_CPU_ROW_REDUCTIONS_H_
#define ZEROSHARD_KERNELS_CPU_ROW_REDUCTIONS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/float_types.h"
#include "kernels/pointwise_math.h"

namespace zeroshard::kernels::cpu {

inline constexpr int kRowLanes = 8;

// max_v z[v], -inf for an empty row. NaNs are skipped, as std::fmax does.
// Exact: a maximum does not depend on the order it is taken in.
template <typename T>
ZS_FORCE_INLINE float RowMax(const T* z, int64_t n) {
  float lane[kRowLanes];
  for (int k = 0; k < kRowLanes; ++k) lane[k] = -INFINITY;
  int64_t v = 0;
  for (; v + kRowLanes <= n; v += kRowLanes) {
    for (int k = 0; k < kRowLanes; ++k) {
      const float x = Load(z[v + k]);
      lane[k] = x > lane[k] ? x : lane[k];
    }
  }
  float mx = -INFINITY;
  for (int k = 0; k < kRowLanes; ++k) mx = lane[k] > mx ? lane[k] : mx;
  for (; v < n; ++v) {
    const float x = Load(z[v]);
    mx = x > mx ? x : mx;
  }
  return mx;
}

// sum_v exp(z[v] - shift): each exponential in f32 (ExpF32), the sums in
// f64, lanes combined pairwise, then the tail in order. The exponentials of
// a block are computed first and then summed, so that both loops vectorise;
// each lane still adds its elements in index order.
template <typename T>
ZS_FORCE_INLINE double RowSumExp(const T* z, int64_t n, float shift) {
  constexpr int64_t kBlock = 64 * kRowLanes;
  double lane[kRowLanes] = {};
  float e[kBlock];
  const int64_t full = n / kRowLanes * kRowLanes;
  for (int64_t v = 0; v < full; v += kBlock) {
    const int64_t m = std::min(kBlock, full - v);  // a multiple of kRowLanes
    for (int64_t j = 0; j < m; ++j) e[j] = ExpF32(Load(z[v + j]) - shift);
    for (int64_t j = 0; j < m; j += kRowLanes) {
      for (int k = 0; k < kRowLanes; ++k) lane[k] += static_cast<double>(e[j + k]);
    }
  }
  double sum = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  for (int64_t v = full; v < n; ++v) sum += static_cast<double>(ExpF32(Load(z[v]) - shift));
  return sum;
}

// One row of the cross-entropy gradient: dz[v] = CrossEntropyLogitGrad(z[v],
// lse, v == target, dloss), with `target` outside [0, n) when the row's
// target lies elsewhere. The loop has no per-element test, so it vectorises;
// the target is read before it and written after it, so dz may be z.
template <typename T>
ZS_FORCE_INLINE void CrossEntropyRowGrad(const T* z, T* dz, int64_t n, float lse, int64_t target, float dloss) {
  const bool has_target = target >= 0 && target < n;
  const float z_target = has_target ? Load(z[target]) : 0.0f;
  for (int64_t v = 0; v < n; ++v) dz[v] = Store<T>(CrossEntropyLogitGrad(Load(z[v]), lse, false, dloss));
  if (has_target) dz[target] = Store<T>(CrossEntropyLogitGrad(z_target, lse, true, dloss));
}

// Rows [r0, r1) of a cross-entropy gradient over row-major (rows, stride)
// logits whose columns [0, valid) are the vocabulary entries begin, begin+1,
// ... and the rest padding: a row with a target in range or elsewhere gets
// CrossEntropyRowGrad, an ignored row (target < 0) and the padding zeros. A
// loop body for RunVectorized (vector_isa.h).
struct CrossEntropyGradRows {
  template <typename T>
  ZS_FORCE_INLINE static void Run(T* dz, const T* z, const float* lse, const int32_t* targets, float dloss,
                                  int64_t begin, int64_t valid, int64_t stride, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* zr = z + r * stride;
      T* dzr = dz + r * stride;
      const int64_t target = targets[r];
      int64_t zero_from = 0;
      if (target >= 0) {
        // outside [0, valid) when another rank holds the target
        CrossEntropyRowGrad(zr, dzr, valid, lse[r], target - begin, dloss);
        zero_from = valid;
      }
      for (int64_t v = zero_from; v < stride; ++v) dzr[v] = Store<T>(0.0f);
    }
  }
};

}  // namespace zeroshard::kernels::cpu

#endif  // ZEROSHARD_KERNELS_CPU_ROW_REDUCTIONS_H_
