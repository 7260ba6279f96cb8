#include "kernels/cpu/attention_cpu.h"

#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/cpu/gemm_cpu.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/row_reductions.h"
#include "kernels/float_types.h"
#include "kernels/pointwise_math.h"

namespace zeroshard::kernels::cpu {
namespace {

// p (T,T) = the head's scaled scores scale * q · k^T (the same call in
// forward and backward).
void HeadScores(int64_t t_len, int64_t hs, float scale, const float* q, const float* k, int64_t ld_qkv, float* p) {
  SgemmRowMajor(Transpose::kNo, Transpose::kYes, t_len, t_len, hs, scale, q, ld_qkv, k, ld_qkv, 0.0f, p, t_len);
}

// Scores in p become probabilities exp(score - lse[t]), exactly 0 above the
// diagonal.
void ScoresToProbabilities(int64_t t_len, const float* lse, float* p) {
  for (int64_t t = 0; t < t_len; ++t) {
    float* row = p + t * t_len;
    const float shift = lse[t];
    for (int64_t j = 0; j <= t; ++j) row[j] = ExpF32(row[j] - shift);
    for (int64_t j = t + 1; j < t_len; ++j) row[j] = 0.0f;
  }
}

// One head: lse (T) of the causal scores, out (T,hs) = softmax · v; p is
// (T,T) scratch. The forward normalises exp(score - max) by the row sum (one
// exp per score); backward's exp(score - lse) agrees to rounding.
void HeadForward(int64_t t_len, int64_t hs, float scale, const float* q, const float* k, const float* v,
                 int64_t ld_qkv, float* p, float* lse, float* out, int64_t ld_out) {
  HeadScores(t_len, hs, scale, q, k, ld_qkv, p);
  for (int64_t t = 0; t < t_len; ++t) {
    float* row = p + t * t_len;
    const float mx = RowMax(row, t + 1);
    // The exponentials first, so that loop vectorises; the sum keeps its order.
    for (int64_t j = 0; j <= t; ++j) row[j] = ExpF32(row[j] - mx);
    float sum = 0.0f;
    for (int64_t j = 0; j <= t; ++j) sum += row[j];
    lse[t] = mx + std::log(sum);
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j <= t; ++j) row[j] *= inv;
    for (int64_t j = t + 1; j < t_len; ++j) row[j] = 0.0f;
  }
  SgemmRowMajor(Transpose::kNo, Transpose::kNo, t_len, hs, t_len, 1.0f, p, t_len, v, ld_qkv, 0.0f, out, ld_out);
}

// One head's backward; p and dp are (T,T) scratch. dq, dk, dv are written.
void HeadBackward(int64_t t_len, int64_t hs, float scale, const float* q, const float* k, const float* v,
                  int64_t ld_qkv, const float* lse, const float* dout, int64_t ld_dout, float* p, float* dp,
                  float* dq, float* dk, float* dv, int64_t ld_dqkv) {
  HeadScores(t_len, hs, scale, q, k, ld_qkv, p);
  ScoresToProbabilities(t_len, lse, p);
  // dp = dout · v^T, then through the softmax (rows only up to the diagonal).
  SgemmRowMajor(Transpose::kNo, Transpose::kYes, t_len, t_len, hs, 1.0f, dout, ld_dout, v, ld_qkv, 0.0f, dp, t_len);
  for (int64_t t = 0; t < t_len; ++t) {
    const float* pr = p + t * t_len;
    float* d = dp + t * t_len;
    float dot = 0.0f;
    for (int64_t j = 0; j <= t; ++j) dot += pr[j] * d[j];
    for (int64_t j = 0; j <= t; ++j) d[j] = SoftmaxInputGrad(pr[j], d[j], dot) * scale;
    for (int64_t j = t + 1; j < t_len; ++j) d[j] = 0.0f;
  }
  // dp now holds d(scores) scaled: dq = dS · k, dk = dS^T · q, dv = p^T · dout.
  SgemmRowMajor(Transpose::kNo, Transpose::kNo, t_len, hs, t_len, 1.0f, dp, t_len, k, ld_qkv, 0.0f, dq, ld_dqkv);
  SgemmRowMajor(Transpose::kYes, Transpose::kNo, t_len, hs, t_len, 1.0f, dp, t_len, q, ld_qkv, 0.0f, dk, ld_dqkv);
  SgemmRowMajor(Transpose::kYes, Transpose::kNo, t_len, hs, t_len, 1.0f, p, t_len, dout, ld_dout, 0.0f, dv, ld_dqkv);
}

// Copies a (rows, cols) block with leading dimension ld into contiguous f32.
template <typename T>
void Gather(const T* src, int64_t ld, int64_t rows, int64_t cols, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = Load(src[r * ld + c]);
  }
}

template <typename T>
void Scatter(const float* src, int64_t rows, int64_t cols, T* dst, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[r * ld + c] = Store<T>(src[r * cols + c]);
  }
}

}  // namespace

absl::Status AttentionForward(int threads, void* out, float* lse, const void* qkv, int64_t batch, int64_t seq_len,
                              int64_t channels, int64_t num_heads, DType dtype) {
  return DispatchFloatDType(dtype, "AttentionForward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t t_len = seq_len, c = channels, nh = num_heads, hs = c / nh;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    const T* x = static_cast<const T*>(qkv);
    T* y = static_cast<T*>(out);
    UseSingleThreadedBlas();  // heads run on the loop threads, each sgemm on one
    ParallelFor(threads, batch * nh, MinItems(4 * t_len * t_len * hs), [&](int64_t i0, int64_t i1) {
      std::vector<float> p(t_len * t_len);
      std::vector<float> staged;  // q, k, v, out for half types
      if constexpr (!std::is_same_v<T, float>) staged.resize(4 * t_len * hs);
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t b = i / nh, h = i % nh;
        const T* q = x + b * t_len * 3 * c + h * hs;
        float* lse_bh = lse + i * t_len;
        T* out_bh = y + b * t_len * c + h * hs;
        if constexpr (std::is_same_v<T, float>) {
          HeadForward(t_len, hs, scale, q, q + c, q + 2 * c, 3 * c, p.data(), lse_bh, out_bh, c);
        } else {
          float* q32 = staged.data();
          float* k32 = q32 + t_len * hs;
          float* v32 = k32 + t_len * hs;
          float* o32 = v32 + t_len * hs;
          Gather(q, 3 * c, t_len, hs, q32);
          Gather(q + c, 3 * c, t_len, hs, k32);
          Gather(q + 2 * c, 3 * c, t_len, hs, v32);
          HeadForward(t_len, hs, scale, q32, k32, v32, hs, p.data(), lse_bh, o32, hs);
          Scatter(o32, t_len, hs, out_bh, c);
        }
      }
    });
    return absl::OkStatus();
  });
}

absl::Status AttentionBackward(int threads, void* dqkv, const void* dout, const void* qkv, const float* lse,
                               int64_t batch, int64_t seq_len, int64_t channels, int64_t num_heads, DType dtype) {
  return DispatchFloatDType(dtype, "AttentionBackward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t t_len = seq_len, c = channels, nh = num_heads, hs = c / nh;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    const T* x = static_cast<const T*>(qkv);
    const T* dy = static_cast<const T*>(dout);
    T* dx = static_cast<T*>(dqkv);
    UseSingleThreadedBlas();  // heads run on the loop threads, each sgemm on one
    ParallelFor(threads, batch * nh, MinItems(4 * t_len * t_len * hs), [&](int64_t i0, int64_t i1) {
      std::vector<float> p(t_len * t_len), dp(t_len * t_len);
      std::vector<float> staged;  // q, k, v, dout, dq, dk, dv for half types
      if constexpr (!std::is_same_v<T, float>) staged.resize(7 * t_len * hs);
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t b = i / nh, h = i % nh;
        const T* q = x + b * t_len * 3 * c + h * hs;
        const T* dout_bh = dy + b * t_len * c + h * hs;
        T* dq = dx + b * t_len * 3 * c + h * hs;
        const float* lse_bh = lse + i * t_len;
        if constexpr (std::is_same_v<T, float>) {
          HeadBackward(t_len, hs, scale, q, q + c, q + 2 * c, 3 * c, lse_bh, dout_bh, c, p.data(), dp.data(), dq,
                       dq + c, dq + 2 * c, 3 * c);
        } else {
          const int64_t sz = t_len * hs;
          float* q32 = staged.data();
          float* k32 = q32 + sz;
          float* v32 = k32 + sz;
          float* do32 = v32 + sz;
          float* dq32 = do32 + sz;
          float* dk32 = dq32 + sz;
          float* dv32 = dk32 + sz;
          Gather(q, 3 * c, t_len, hs, q32);
          Gather(q + c, 3 * c, t_len, hs, k32);
          Gather(q + 2 * c, 3 * c, t_len, hs, v32);
          Gather(dout_bh, c, t_len, hs, do32);
          HeadBackward(t_len, hs, scale, q32, k32, v32, hs, lse_bh, do32, hs, p.data(), dp.data(), dq32, dk32, dv32,
                       hs);
          Scatter(dq32, t_len, hs, dq, 3 * c);
          Scatter(dk32, t_len, hs, dq + c, 3 * c);
          Scatter(dv32, t_len, hs, dq + 2 * c, 3 * c);
        }
      }
    });
    return absl::OkStatus();
  });
}

}  // namespace zeroshard::kernels::cpu
