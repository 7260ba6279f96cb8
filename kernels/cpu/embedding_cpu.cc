#include "kernels/cpu/embedding_cpu.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/float_types.h"

namespace zeroshard::kernels::cpu {

absl::Status EmbeddingForward(int threads, void* out, const int32_t* tokens, const void* wte, const void* wpe,
                              int64_t batch, int64_t seq_len, int64_t channels, DType dtype) {
  return DispatchFloatDType(dtype, "EmbeddingForward", [&](auto tag) {
    using T = decltype(tag);
    T* y = static_cast<T*>(out);
    const T* te = static_cast<const T*>(wte);
    const T* pe = static_cast<const T*>(wpe);
    const int64_t c = channels;
    ParallelFor(threads, batch * seq_len, MinItems(c), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* te_row = te + static_cast<int64_t>(tokens[r]) * c;
        const T* pe_row = pe + (r % seq_len) * c;
        T* y_row = y + r * c;
        for (int64_t i = 0; i < c; ++i) y_row[i] = Store<T>(Load(te_row[i]) + Load(pe_row[i]));
      }
    });
    return absl::OkStatus();
  });
}

absl::Status EmbeddingBackward(int threads, void* dwte, void* dwpe, const void* dout, const int32_t* tokens,
                               int64_t batch, int64_t seq_len, int64_t channels, int64_t vocab, DType dtype) {
  return DispatchFloatDType(dtype, "EmbeddingBackward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t rows = batch * seq_len, c = channels;
    const T* dy = static_cast<const T*>(dout);
    // Stable counting sort of positions by token; only tokens that occur are visited.
    std::vector<int64_t> count(vocab + 1, 0);
    for (int64_t r = 0; r < rows; ++r) ++count[tokens[r] + 1];
    for (int64_t v = 0; v < vocab; ++v) count[v + 1] += count[v];
    std::vector<int64_t> order(rows);
    {
      std::vector<int64_t> next(count.begin(), count.end() - 1);
      for (int64_t r = 0; r < rows; ++r) order[next[tokens[r]]++] = r;
    }
    std::vector<int32_t> present;
    for (int64_t v = 0; v < vocab; ++v) {
      if (count[v + 1] > count[v]) present.push_back(static_cast<int32_t>(v));
    }
    T* dte = static_cast<T*>(dwte);
    ParallelFor(threads, static_cast<int64_t>(present.size()), MinItems(c * rows / static_cast<int64_t>(std::max<size_t>(1, present.size()))), [&](int64_t i0, int64_t i1) {
      std::vector<float> acc(c);
      for (int64_t i = i0; i < i1; ++i) {
        const int32_t v = present[i];
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t k = count[v]; k < count[v + 1]; ++k) {
          const T* dy_row = dy + order[k] * c;
          for (int64_t j = 0; j < c; ++j) acc[j] += Load(dy_row[j]);
        }
        T* row = dte + static_cast<int64_t>(v) * c;
        for (int64_t j = 0; j < c; ++j) row[j] = Store<T>(Load(row[j]) + acc[j]);
      }
    });
    if (dwpe != nullptr) {
      T* dpe = static_cast<T*>(dwpe);
      ParallelFor(threads, seq_len, MinItems(c * batch), [&](int64_t t0, int64_t t1) {
        std::vector<float> acc(c);
        for (int64_t t = t0; t < t1; ++t) {
          std::fill(acc.begin(), acc.end(), 0.0f);
          for (int64_t b = 0; b < batch; ++b) {
            const T* dy_row = dy + (b * seq_len + t) * c;
            for (int64_t j = 0; j < c; ++j) acc[j] += Load(dy_row[j]);
          }
          T* row = dpe + t * c;
          for (int64_t j = 0; j < c; ++j) row[j] = Store<T>(Load(row[j]) + acc[j]);
        }
      });
    }
    return absl::OkStatus();
  });
}

}  // namespace zeroshard::kernels::cpu
