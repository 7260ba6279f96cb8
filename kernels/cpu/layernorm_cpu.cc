#include "kernels/cpu/layernorm_cpu.h"

#include <cmath>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_isa.h"
#include "kernels/float_types.h"
#include "kernels/pointwise_math.h"

namespace zeroshard::kernels::cpu {

namespace {

// Loop bodies, compiled per vector ISA (vector_isa.h). Each row's sums stay
// sequential in index order (no reassociation), so only the element-wise
// passes widen.
struct ForwardRows {
  template <typename T>
  ZS_FORCE_INLINE static void Run(T* y, float* mean, float* rstd, const T* x, const T* w, const T* b, int64_t c,
                                  float eps, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * c;
      float sum = 0.0f;
      for (int64_t i = 0; i < c; ++i) sum += Load(xr[i]);
      const float m = sum / static_cast<float>(c);
      float sq = 0.0f;
      for (int64_t i = 0; i < c; ++i) {
        float d = Load(xr[i]) - m;
        sq += d * d;
      }
      const float s = 1.0f / std::sqrt(sq / static_cast<float>(c) + eps);
      T* yr = y + r * c;
      for (int64_t i = 0; i < c; ++i) yr[i] = Store<T>((Load(xr[i]) - m) * s * Load(w[i]) + Load(b[i]));
      mean[r] = m;
      rstd[r] = s;
    }
  }
};

struct InputGradRows {
  template <typename T>
  ZS_FORCE_INLINE static void Run(T* dx, const T* dy, const T* x, const T* w, const float* mean, const float* rstd,
                                  int64_t c, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * c;
      const T* dyr = dy + r * c;
      const float m = mean[r], s = rstd[r];
      float dnorm_sum = 0.0f, dnorm_norm_sum = 0.0f;
      for (int64_t i = 0; i < c; ++i) {
        float norm = (Load(xr[i]) - m) * s;
        float dnorm = Load(dyr[i]) * Load(w[i]);
        dnorm_sum += dnorm;
        dnorm_norm_sum += dnorm * norm;
      }
      const float dnorm_mean = dnorm_sum / static_cast<float>(c);
      const float dnorm_norm_mean = dnorm_norm_sum / static_cast<float>(c);
      T* dxr = dx + r * c;
      for (int64_t i = 0; i < c; ++i) {
        float norm = (Load(xr[i]) - m) * s;
        dxr[i] = Store<T>(LayerNormInputGrad(Load(dyr[i]) * Load(w[i]), norm, s, dnorm_mean, dnorm_norm_mean));
      }
    }
  }
};

// Columns [c0, c1) of the parameter gradients, each summed over rows in row
// order into acc_w/acc_b (zeroed, c1 - c0 long), then added to dw/db.
struct ParamGradColumns {
  template <typename T>
  ZS_FORCE_INLINE static void Run(T* dw, T* db, float* acc_w, float* acc_b, const T* dy, const T* x,
                                  const float* mean, const float* rstd, int64_t rows, int64_t c, int64_t c0,
                                  int64_t c1) {
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * c;
      const T* dyr = dy + r * c;
      const float m = mean[r], s = rstd[r];
      for (int64_t i = c0; i < c1; ++i) {
        float g = Load(dyr[i]);
        acc_w[i - c0] += g * ((Load(xr[i]) - m) * s);
        acc_b[i - c0] += g;
      }
    }
    for (int64_t i = c0; i < c1; ++i) {
      dw[i] = Store<T>(Load(dw[i]) + acc_w[i - c0]);
      db[i] = Store<T>(Load(db[i]) + acc_b[i - c0]);
    }
  }
};

}  // namespace

absl::Status LayerNormForward(int threads, void* out, float* mean, float* rstd, const void* inp, const void* weight,
                              const void* bias, int64_t rows, int64_t channels, float eps, DType dtype) {
  return DispatchFloatDType(dtype, "LayerNormForward", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(inp);
    const T* w = static_cast<const T*>(weight);
    const T* b = static_cast<const T*>(bias);
    T* y = static_cast<T*>(out);
    const int64_t c = channels;
    ParallelFor(threads, rows, MinItems(4 * c), [&](int64_t r0, int64_t r1) {
      RunVectorized<ForwardRows>(y, mean, rstd, x, w, b, c, eps, r0, r1);
    });
    return absl::OkStatus();
  });
}

absl::Status LayerNormBackward(int threads, void* dinp, void* dweight, void* dbias, const void* dout,
                               const void* inp, const void* weight, const float* mean, const float* rstd,
                               int64_t rows, int64_t channels, DType dtype) {
  return DispatchFloatDType(dtype, "LayerNormBackward", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(inp);
    const T* w = static_cast<const T*>(weight);
    const T* dy = static_cast<const T*>(dout);
    T* dx = static_cast<T*>(dinp);
    const int64_t c = channels;
    // The input and parameter gradients are separate passes, so either may
    // be skipped without changing the other's arithmetic.
    if (dx != nullptr) {
      ParallelFor(threads, rows, MinItems(4 * c), [&](int64_t r0, int64_t r1) {
        RunVectorized<InputGradRows>(dx, dy, x, w, mean, rstd, c, r0, r1);
      });
    }
    if (dweight == nullptr) return absl::OkStatus();
    // Parameter gradients: each column summed over rows in row order.
    T* dw = static_cast<T*>(dweight);
    T* db = static_cast<T*>(dbias);
    ParallelFor(threads, c, MinItems(3 * rows), [&](int64_t c0, int64_t c1) {
      std::vector<float> acc_w(c1 - c0, 0.0f), acc_b(c1 - c0, 0.0f);
      RunVectorized<ParamGradColumns>(dw, db, acc_w.data(), acc_b.data(), dy, x, mean, rstd, rows, c, c0, c1);
    });
    return absl::OkStatus();
  });
}

}  // namespace zeroshard::kernels::cpu
