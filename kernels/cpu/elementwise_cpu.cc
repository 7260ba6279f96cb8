#include "kernels/cpu/elementwise_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_isa.h"
#include "kernels/float_types.h"
#include "kernels/pointwise_math.h"

namespace zeroshard::kernels::cpu {

namespace {

// Loop bodies, compiled per vector ISA (vector_isa.h).
struct GeluForwardLoop {
  template <typename T>
  ZS_FORCE_INLINE static void Run(T* y, const T* x, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = Store<T>(GeluTanh(Load(x[i])));
  }
};

struct GeluBackwardLoop {
  template <typename T>
  ZS_FORCE_INLINE static void Run(T* dx, const T* x, const T* dy, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dx[i] = Store<T>(GeluTanhGrad(Load(x[i])) * Load(dy[i]));
  }
};

struct AddLoop {
  template <typename T>
  ZS_FORCE_INLINE static void Run(T* y, const T* a, const T* c, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = Store<T>(Load(a[i]) + Load(c[i]));
  }
};

struct CastLoop {
  template <typename Out, typename In>
  ZS_FORCE_INLINE static void Run(Out* y, const In* x, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = Store<Out>(Load(x[i]));
  }
};

struct AccumulateLoop {
  template <typename T>
  ZS_FORCE_INLINE static void Run(float* dst, const T* x, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dst[i] += Load(x[i]);
  }
};

}  // namespace

absl::Status GeluForward(int threads, void* out, const void* inp, int64_t n, DType dtype) {
  return DispatchFloatDType(dtype, "GeluForward", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(inp);
    T* y = static_cast<T*>(out);
    ParallelFor(threads, n, MinItems(16), [&](int64_t b, int64_t e) {
      RunVectorized<GeluForwardLoop>(y, x, b, e);
    });
    return absl::OkStatus();
  });
}

absl::Status GeluBackward(int threads, void* dinp, const void* inp, const void* dout, int64_t n, DType dtype) {
  return DispatchFloatDType(dtype, "GeluBackward", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(inp);
    const T* dy = static_cast<const T*>(dout);
    T* dx = static_cast<T*>(dinp);
    ParallelFor(threads, n, MinItems(16), [&](int64_t b, int64_t e) {
      RunVectorized<GeluBackwardLoop>(dx, x, dy, b, e);
    });
    return absl::OkStatus();
  });
}

absl::Status ResidualForward(int threads, void* out, const void* a, const void* b, int64_t n, DType dtype) {
  return DispatchFloatDType(dtype, "ResidualForward", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    T* y = static_cast<T*>(out);
    ParallelFor(threads, n, MinItems(1), [&](int64_t s, int64_t e) { RunVectorized<AddLoop>(y, pa, pb, s, e); });
    return absl::OkStatus();
  });
}

absl::Status AddInPlace(int threads, void* y, const void* x, int64_t n, DType dtype) {
  return ResidualForward(threads, y, y, x, n, dtype);
}

absl::Status Cast(int threads, void* out, DType out_dtype, const void* in, DType in_dtype, int64_t n) {
  if (out_dtype == in_dtype) {
    if (out != in) std::memcpy(out, in, static_cast<size_t>(n) * DTypeSize(in_dtype));
    return absl::OkStatus();
  }
  return DispatchFloatDType(in_dtype, "Cast", [&](auto in_tag) {
    using In = decltype(in_tag);
    return DispatchFloatDType(out_dtype, "Cast", [&](auto out_tag) {
      using Out = decltype(out_tag);
      const In* x = static_cast<const In*>(in);
      Out* y = static_cast<Out*>(out);
      // bf16 <-> f16 goes through f32, which holds both exactly.
      ParallelFor(threads, n, MinItems(1), [&](int64_t s, int64_t e) { RunVectorized<CastLoop>(y, x, s, e); });
      return absl::OkStatus();
    });
  });
}

absl::Status AccumulateInto(int threads, float* dst, const void* src, DType src_dtype, int64_t n) {
  return DispatchFloatDType(src_dtype, "AccumulateInto", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(src);
    ParallelFor(threads, n, MinItems(1), [&](int64_t s, int64_t e) { RunVectorized<AccumulateLoop>(dst, x, s, e); });
    return absl::OkStatus();
  });
}

absl::Status ScaleInPlace(int threads, void* x, int64_t n, DType dtype, float scale, bool* found_nonfinite) {
  return DispatchFloatDType(dtype, "ScaleInPlace", [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(x);
    const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(threads, n / MinWorkPerThread().load()));
    std::vector<char> found(blocks, 0);  // per block; OR of booleans is order-free
    ParallelFor(threads, blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        int64_t s = n * blk / blocks, e = n * (blk + 1) / blocks;
        bool bad = false;
        for (int64_t i = s; i < e; ++i) {
          float v = Load(p[i]) * scale;
          T stored = Store<T>(v);
          bad |= !std::isfinite(Load(stored));
          p[i] = stored;
        }
        found[blk] = bad;
      }
    });
    bool any = false;
    for (char f : found) any |= (f != 0);
    if (found_nonfinite != nullptr) *found_nonfinite = any;
    return absl::OkStatus();
  });
}

absl::Status SumOfSquares(int threads, const void* x, int64_t n, DType dtype, double* result) {
  return DispatchFloatDType(dtype, "SumOfSquares", [&](auto tag) {
    using T = decltype(tag);
    const T* p = static_cast<const T*>(x);
    const int64_t chunks = (n + kSumOfSquaresChunk - 1) / kSumOfSquaresChunk;
    std::vector<double> partial(chunks, 0.0);
    ParallelFor(threads, chunks, MinItems(kSumOfSquaresChunk), [&](int64_t c0, int64_t c1) {
      for (int64_t ch = c0; ch < c1; ++ch) {
        int64_t s = ch * kSumOfSquaresChunk, e = std::min(n, s + kSumOfSquaresChunk);
        double acc = 0.0;
        for (int64_t i = s; i < e; ++i) {
          double v = Load(p[i]);
          acc += v * v;
        }
        partial[ch] = acc;
      }
    });
    double total = 0.0;
    for (double v : partial) total += v;
    *result = total;
    return absl::OkStatus();
  });
}

}  // namespace zeroshard::kernels::cpu
