#include "kernels/cpu/quantize_cpu.h"

#include <cstring>

#include "kernels/cpu/parallel.h"
#include "kernels/float_types.h"
#include "kernels/quantize_math.h"

namespace zeroshard::kernels::cpu {
namespace {

int64_t NumBlocks(int64_t n, int64_t block) { return (n + block - 1) / block; }

// The value quantized: x, or x + residual (f32).
template <typename T>
inline float Compensated(const T* x, const float* residual, int64_t i) {
  return residual == nullptr ? Load(x[i]) : QuantAdd(Load(x[i]), residual[i]);
}

}  // namespace

absl::Status QuantizeInt8Blocks(int threads, void* packed, const void* in, DType in_dtype, int64_t n, int64_t block,
                                bool reject_non_finite, float* residual) {
  return DispatchFloatDType(in_dtype, "QuantizeInt8Blocks", [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in);
    int8_t* q = static_cast<int8_t*>(packed);
    float* scales = reinterpret_cast<float*>(static_cast<char*>(packed) + Int8ScalesOffset(n));
    const int64_t nb = NumBlocks(n, block);
    // Pass 1: the scales (NaN marks a non-finite block), so that a rejected
    // input leaves residual untouched.
    ParallelFor(threads, nb, MinItems(block), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t i0 = b * block, i1 = i0 + block < n ? i0 + block : n;
        float amax = 0.0f;
        bool finite = true;
        for (int64_t i = i0; i < i1; ++i) {
          const float c = Compensated(x, residual, i);
          const float a = c < 0.0f ? -c : c;
          finite &= QuantFinite(c);
          amax = a > amax ? a : amax;
        }
        scales[b] = finite ? QuantScale(amax) : QuantNonFiniteScale();
      }
    });
    if (reject_non_finite) {
      // A NaN scale is the mark: finite blocks never get one.
      for (int64_t b = 0; b < nb; ++b) {
        if (scales[b] == scales[b]) continue;
        const int64_t i0 = b * block, i1 = i0 + block < n ? i0 + block : n;
        for (int64_t i = i0; i < i1; ++i) {
          const float c = Compensated(x, residual, i);
          if (!QuantFinite(c)) return QuantNonFiniteError(i, n, c, b);
        }
      }
    }
    // Pass 2: values and residuals. A non-finite block (kPropagate) gets
    // q = 0 and keeps its residual.
    ParallelFor(threads, nb, MinItems(block), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t i0 = b * block, i1 = i0 + block < n ? i0 + block : n;
        const float s = scales[b];
        if (s != s) {
          std::memset(q + i0, 0, i1 - i0);
          continue;
        }
        if (residual == nullptr) {
          for (int64_t i = i0; i < i1; ++i) q[i] = QuantValue(Load(x[i]), s);
        } else {
          for (int64_t i = i0; i < i1; ++i) {
            const float c = QuantAdd(Load(x[i]), residual[i]);
            const int8_t v = QuantValue(c, s);
            q[i] = v;
            residual[i] = QuantSub(c, QuantDequant(v, s));
          }
        }
      }
    });
    std::memset(q + n, 0, Int8ScalesOffset(n) - n);
    return absl::OkStatus();
  });
}

absl::Status DequantizeInt8Blocks(int threads, void* out, DType out_dtype, const void* packed, int64_t n,
                                  int64_t block) {
  return DispatchFloatDType(out_dtype, "DequantizeInt8Blocks", [&](auto tag) {
    using T = decltype(tag);
    T* y = static_cast<T*>(out);
    const int8_t* q = static_cast<const int8_t*>(packed);
    const float* scales = reinterpret_cast<const float*>(static_cast<const char*>(packed) + Int8ScalesOffset(n));
    ParallelFor(threads, NumBlocks(n, block), MinItems(block), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t i0 = b * block, i1 = i0 + block < n ? i0 + block : n;
        const float s = scales[b];
        for (int64_t i = i0; i < i1; ++i) y[i] = Store<T>(QuantDequant(q[i], s));
      }
    });
    return absl::OkStatus();
  });
}

absl::Status DequantizeInt8BlocksAccumulate(int threads, float* acc, const void* packed, int64_t n, int64_t block) {
  const int8_t* q = static_cast<const int8_t*>(packed);
  const float* scales = reinterpret_cast<const float*>(static_cast<const char*>(packed) + Int8ScalesOffset(n));
  ParallelFor(threads, NumBlocks(n, block), MinItems(block), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t i0 = b * block, i1 = i0 + block < n ? i0 + block : n;
      const float s = scales[b];
      for (int64_t i = i0; i < i1; ++i) acc[i] = QuantAdd(acc[i], QuantDequant(q[i], s));
    }
  });
  return absl::OkStatus();
}

}  // namespace zeroshard::kernels::cpu
