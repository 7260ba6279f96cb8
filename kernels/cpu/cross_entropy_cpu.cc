#include "kernels/cpu/cross_entropy_cpu.h"

#include <cmath>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/row_reductions.h"
#include "kernels/cpu/vector_isa.h"
#include "kernels/float_types.h"
#include "kernels/pointwise_math.h"

namespace zeroshard::kernels::cpu {

namespace {

// Row loops, compiled per vector ISA (vector_isa.h).
struct ForwardRows {
  template <typename T>
  ZS_FORCE_INLINE static void Run(float* losses, float* lse, const T* z, const int32_t* targets, int64_t vocab,
                                  int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* zr = z + r * vocab;
      const float mx = RowMax(zr, vocab);
      // f64 sum: V is ~5e4 and this is the loss's only long reduction.
      const double sum = RowSumExp(zr, vocab, mx);
      const float row_lse = mx + static_cast<float>(std::log(sum));
      lse[r] = row_lse;
      losses[r] = targets[r] < 0 ? 0.0f : row_lse - Load(zr[targets[r]]);
    }
  }
};

}  // namespace

absl::Status CrossEntropyForward(int threads, float* losses, float* lse, float* loss_sums, const void* logits,
                                 const int32_t* targets, int64_t rows, int64_t vocab, DType dtype) {
  return DispatchFloatDType(dtype, "CrossEntropyForward", [&](auto tag) {
    using T = decltype(tag);
    const T* z = static_cast<const T*>(logits);
    ParallelFor(threads, rows, MinItems(4 * vocab), [&](int64_t r0, int64_t r1) {
      RunVectorized<ForwardRows>(losses, lse, z, targets, vocab, r0, r1);
    });
    if (loss_sums != nullptr) {
      double total = 0.0;
      int64_t count = 0;
      for (int64_t r = 0; r < rows; ++r) {
        if (targets[r] < 0) continue;
        total += losses[r];
        ++count;
      }
      loss_sums[0] = static_cast<float>(total);
      loss_sums[1] = static_cast<float>(count);
    }
    return absl::OkStatus();
  });
}

absl::Status CrossEntropyBackward(int threads, void* dlogits, const void* logits, const float* lse,
                                  const int32_t* targets, float dloss, int64_t rows, int64_t vocab, DType dtype) {
  return DispatchFloatDType(dtype, "CrossEntropyBackward", [&](auto tag) {
    using T = decltype(tag);
    const T* z = static_cast<const T*>(logits);
    T* dz = static_cast<T*>(dlogits);
    ParallelFor(threads, rows, MinItems(4 * vocab), [&](int64_t r0, int64_t r1) {
      RunVectorized<CrossEntropyGradRows>(dz, z, lse, targets, dloss, int64_t{0}, vocab, vocab, r0, r1);
    });
    return absl::OkStatus();
  });
}

}  // namespace zeroshard::kernels::cpu
