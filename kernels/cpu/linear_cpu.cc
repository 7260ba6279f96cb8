#include "kernels/cpu/linear_cpu.h"

#include <algorithm>
#include <vector>

#include "core/step_profile.h"
#include "kernels/cpu/f32_staging.h"
#include "kernels/cpu/gemm_cpu.h"
#include "kernels/cpu/parallel.h"
#include "kernels/float_types.h"

namespace zeroshard::kernels::cpu {

void ColumnSums(int threads, const float* m, int64_t rows, int64_t cols, float* sums) {
  // Column blocks of >= 16 so each thread streams whole cache lines of rows.
  ParallelFor(threads, cols, MinItems(rows), [&](int64_t c0, int64_t c1) {
    std::fill(sums + c0, sums + c1, 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = m + r * cols;
      for (int64_t c = c0; c < c1; ++c) sums[c] += row[c];
    }
  });
}

absl::Status LinearForward(int threads, void* out, const void* inp, const void* weight, const void* bias,
                           int64_t rows, int64_t in_features, int64_t out_features, DType dtype) {
  return DispatchFloatDType(dtype, "LinearForward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = rows, c = in_features, oc = out_features;
    F32Input<T> x(threads, static_cast<const T*>(inp), n * c);
    F32Input<T> w(threads, static_cast<const T*>(weight), c * oc);
    F32Output<T> y(threads, static_cast<T*>(out), n * oc, /*load=*/false);
    float beta = 0.0f;
    if (bias != nullptr) {
      // Start from the bias so one sgemm with beta = 1 adds x·W to it.
      const step_profile::Scope profile(step_profile::Category::kElementwise);
      const T* b = static_cast<const T*>(bias);
      float* yp = y.get();
      ParallelFor(threads, n, MinItems(oc), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          for (int64_t j = 0; j < oc; ++j) yp[r * oc + j] = Load(b[j]);
        }
      });
      beta = 1.0f;
    }
    TiledSgemm(threads, Transpose::kNo, Transpose::kNo, n, oc, c, 1.0f, x.get(), c, w.get(), oc, beta, y.get(), oc);
    y.Commit();
    return absl::OkStatus();
  });
}

absl::Status LinearBackward(int threads, void* dinp, void* dweight, void* dbias, const void* dout, const void* inp,
                            const void* weight, int64_t rows, int64_t in_features, int64_t out_features,
                            DType dtype) {
  return DispatchFloatDType(dtype, "LinearBackward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = rows, c = in_features, oc = out_features;
    F32Input<T> dy(threads, static_cast<const T*>(dout), n * oc);
    if (dinp != nullptr) {
      F32Input<T> w(threads, static_cast<const T*>(weight), c * oc);
      F32Output<T> dx(threads, static_cast<T*>(dinp), n * c, /*load=*/false);
      TiledSgemm(threads, Transpose::kNo, Transpose::kYes, n, c, oc, 1.0f, dy.get(), oc, w.get(), oc, 0.0f, dx.get(), c);
      dx.Commit();
    }
    if (dweight != nullptr) {
      F32Input<T> x(threads, static_cast<const T*>(inp), n * c);
      F32Output<T> dw(threads, static_cast<T*>(dweight), c * oc, /*load=*/true);
      TiledSgemm(threads, Transpose::kYes, Transpose::kNo, c, oc, n, 1.0f, x.get(), c, dy.get(), oc, 1.0f, dw.get(), oc);
      dw.Commit();
    }
    if (dbias != nullptr) {
      const step_profile::Scope profile(step_profile::Category::kElementwise);
      std::vector<float> sums(oc);
      ColumnSums(threads, dy.get(), n, oc, sums.data());
      T* db = static_cast<T*>(dbias);
      for (int64_t j = 0; j < oc; ++j) db[j] = Store<T>(Load(db[j]) + sums[j]);
    }
    return absl::OkStatus();
  });
}

absl::Status BiasAdd(int threads, void* out, const void* bias, int64_t rows, int64_t cols, DType dtype) {
  return DispatchFloatDType(dtype, "BiasAdd", [&](auto tag) {
    using T = decltype(tag);
    T* y = static_cast<T*>(out);
    const T* b = static_cast<const T*>(bias);
    ParallelFor(threads, rows, MinItems(cols), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t j = 0; j < cols; ++j) y[r * cols + j] = Store<T>(Load(y[r * cols + j]) + Load(b[j]));
      }
    });
    return absl::OkStatus();
  });
}

absl::Status BiasGrad(int threads, void* dbias, const void* dout, int64_t rows, int64_t cols, DType dtype) {
  return DispatchFloatDType(dtype, "BiasGrad", [&](auto tag) {
    using T = decltype(tag);
    F32Input<T> dy(threads, static_cast<const T*>(dout), rows * cols);
    std::vector<float> sums(cols);
    ColumnSums(threads, dy.get(), rows, cols, sums.data());
    T* db = static_cast<T*>(dbias);
    for (int64_t j = 0; j < cols; ++j) db[j] = Store<T>(Load(db[j]) + sums[j]);
    return absl::OkStatus();
  });
}

}  // namespace zeroshard::kernels::cpu
