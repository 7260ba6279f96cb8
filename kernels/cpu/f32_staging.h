// f32 working copies of bf16/f16 tensors for the CPU kernels that compute in
// f32 through OpenBLAS. For T = float no copy is made.
//
// The copies are transient host scratch (freed when the stager dies), not
// tracked by MemoryTracker: they exist only inside one kernel call.
#ifndef ZEROSHARD_KERNELS_CPU_F32_STAGING_H_
#define ZEROSHARD_KERNELS_CPU_F32_STAGING_H_

#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/float_types.h"

namespace zeroshard::kernels::cpu {

template <typename T>
void WidenToF32(int threads, const T* in, float* out, int64_t n) {
  ParallelFor(threads, n, MinItems(1), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = Load(in[i]);
  });
}

template <typename T>
void RoundFromF32(int threads, const float* in, T* out, int64_t n) {
  ParallelFor(threads, n, MinItems(1), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = Store<T>(in[i]);
  });
}

// Read-only f32 view of n elements.
template <typename T>
class F32Input {
 public:
  F32Input(int threads, const T* data, int64_t n) {
    if constexpr (std::is_same_v<T, float>) {
      ptr_ = data;
    } else {
      copy_.resize(n);
      WidenToF32(threads, data, copy_.data(), n);
      ptr_ = copy_.data();
    }
  }
  const float* get() const { return ptr_; }

 private:
  const float* ptr_ = nullptr;
  std::vector<float> copy_;
};

// Writable f32 view of n elements; Commit() rounds back into `data` for
// half types. `load` says whether the initial contents are needed (beta != 0).
template <typename T>
class F32Output {
 public:
  F32Output(int threads, T* data, int64_t n, bool load) : threads_(threads), data_(data), n_(n) {
    if constexpr (std::is_same_v<T, float>) {
      ptr_ = data;
    } else {
      copy_.resize(n);
      if (load) WidenToF32(threads, data, copy_.data(), n);
      ptr_ = copy_.data();
    }
  }
  float* get() { return ptr_; }
  void Commit() {
    if constexpr (!std::is_same_v<T, float>) RoundFromF32(threads_, ptr_, data_, n_);
  }

 private:
  int threads_;
  T* data_;
  int64_t n_;
  float* ptr_ = nullptr;
  std::vector<float> copy_;
};

}  // namespace zeroshard::kernels::cpu

#endif  // ZEROSHARD_KERNELS_CPU_F32_STAGING_H_
