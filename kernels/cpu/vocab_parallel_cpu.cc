#include "kernels/cpu/vocab_parallel_cpu.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/row_reductions.h"
#include "kernels/cpu/vector_isa.h"
#include "kernels/float_types.h"
#include "kernels/pointwise_math.h"

namespace zeroshard::kernels::cpu {
namespace {

bool InRange(int64_t token, int64_t begin, int64_t valid) { return token >= begin && token < begin + valid; }

// Each row's sum of exponentials and its target's logit (0 where another
// rank holds it); compiled per vector ISA (vector_isa.h).
struct SumExpAndTargetRows {
  template <typename T>
  ZS_FORCE_INLINE static void Run(float* sums, const T* z, const float* row_max, const int32_t* targets, int64_t rows,
                                  int64_t begin, int64_t local, int64_t valid, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* zr = z + r * local;
      const double sum = RowSumExp(zr, valid, row_max[r]);  // as CrossEntropyForward
      sums[r] = static_cast<float>(sum);
      const int64_t target = targets[r];
      sums[rows + r] = InRange(target, begin, valid) ? Load(zr[target - begin]) : 0.0f;
    }
  }
};

}  // namespace

absl::Status EmbeddingForwardVocabRange(int threads, void* out, const int32_t* tokens, const void* wte_local,
                                        const void* wpe, int64_t batch, int64_t seq_len, int64_t channels,
                                        int64_t begin, int64_t /*local*/, int64_t valid, DType dtype) {
  return DispatchFloatDType(dtype, "EmbeddingForwardVocabRange", [&](auto tag) {
    using T = decltype(tag);
    T* y = static_cast<T*>(out);
    const T* te = static_cast<const T*>(wte_local);
    const T* pe = static_cast<const T*>(wpe);
    const int64_t c = channels;
    ParallelFor(threads, batch * seq_len, MinItems(c), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        T* y_row = y + r * c;
        const int64_t token = tokens[r];
        if (!InRange(token, begin, valid)) {
          for (int64_t i = 0; i < c; ++i) y_row[i] = Store<T>(0.0f);
          continue;
        }
        const T* te_row = te + (token - begin) * c;
        const T* pe_row = pe + (r % seq_len) * c;
        for (int64_t i = 0; i < c; ++i) y_row[i] = Store<T>(Load(te_row[i]) + Load(pe_row[i]));
      }
    });
    return absl::OkStatus();
  });
}

absl::Status EmbeddingBackwardVocabRange(int threads, void* dwte_local, void* dwpe, const void* dout,
                                         const int32_t* tokens, int64_t batch, int64_t seq_len, int64_t channels,
                                         int64_t begin, int64_t local, int64_t valid, DType dtype) {
  return DispatchFloatDType(dtype, "EmbeddingBackwardVocabRange", [&](auto tag) {
    using T = decltype(tag);
    const int64_t rows = batch * seq_len, c = channels;
    const T* dy = static_cast<const T*>(dout);
    // Stable counting sort of the range's positions by local row.
    std::vector<int64_t> count(local + 1, 0);
    int64_t hits = 0;
    for (int64_t r = 0; r < rows; ++r) {
      if (InRange(tokens[r], begin, valid)) ++count[tokens[r] - begin + 1], ++hits;
    }
    for (int64_t v = 0; v < local; ++v) count[v + 1] += count[v];
    std::vector<int64_t> order(hits);
    {
      std::vector<int64_t> next(count.begin(), count.end() - 1);
      for (int64_t r = 0; r < rows; ++r) {
        if (InRange(tokens[r], begin, valid)) order[next[tokens[r] - begin]++] = r;
      }
    }
    std::vector<int64_t> present;
    for (int64_t v = 0; v < local; ++v) {
      if (count[v + 1] > count[v]) present.push_back(v);
    }
    T* dte = static_cast<T*>(dwte_local);
    const int64_t per_row = c * std::max<int64_t>(1, hits) / std::max<int64_t>(1, static_cast<int64_t>(present.size()));
    ParallelFor(threads, static_cast<int64_t>(present.size()), MinItems(per_row), [&](int64_t i0, int64_t i1) {
      std::vector<float> acc(c);
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t v = present[i];
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t k = count[v]; k < count[v + 1]; ++k) {
          const T* dy_row = dy + order[k] * c;
          for (int64_t j = 0; j < c; ++j) acc[j] += Load(dy_row[j]);
        }
        T* row = dte + v * c;
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

absl::Status VocabParallelRowMax(int threads, float* row_max, const void* logits_local, int64_t rows, int64_t local,
                                 int64_t valid, DType dtype) {
  return DispatchFloatDType(dtype, "VocabParallelRowMax", [&](auto tag) {
    using T = decltype(tag);
    const T* z = static_cast<const T*>(logits_local);
    ParallelFor(threads, rows, MinItems(valid), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        row_max[r] = RowMax(z + r * local, valid);
      }
    });
    return absl::OkStatus();
  });
}

absl::Status VocabParallelSumExpAndTarget(int threads, float* sums, const void* logits_local, const float* row_max,
                                          const int32_t* targets, int64_t rows, int64_t begin, int64_t local,
                                          int64_t valid, DType dtype) {
  return DispatchFloatDType(dtype, "VocabParallelSumExpAndTarget", [&](auto tag) {
    using T = decltype(tag);
    const T* z = static_cast<const T*>(logits_local);
    ParallelFor(threads, rows, MinItems(4 * valid), [&](int64_t r0, int64_t r1) {
      RunVectorized<SumExpAndTargetRows>(sums, z, row_max, targets, rows, begin, local, valid, r0, r1);
    });
    return absl::OkStatus();
  });
}

absl::Status VocabParallelLoss(int threads, float* losses, float* lse, float* loss_sums, const float* row_max,
                               const float* sums, const int32_t* targets, int64_t rows) {
  ParallelFor(threads, rows, MinItems(64), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float row_lse = row_max[r] + static_cast<float>(std::log(static_cast<double>(sums[r])));
      lse[r] = row_lse;
      losses[r] = targets[r] < 0 ? 0.0f : row_lse - sums[rows + r];
    }
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
}

absl::Status VocabParallelCrossEntropyBackward(int threads, void* dlogits_local, const void* logits_local,
                                               const float* lse, const int32_t* targets, float dloss, int64_t rows,
                                               int64_t begin, int64_t local, int64_t valid, DType dtype) {
  return DispatchFloatDType(dtype, "VocabParallelCrossEntropyBackward", [&](auto tag) {
    using T = decltype(tag);
    const T* z = static_cast<const T*>(logits_local);
    T* dz = static_cast<T*>(dlogits_local);
    ParallelFor(threads, rows, MinItems(4 * local), [&](int64_t r0, int64_t r1) {
      RunVectorized<CrossEntropyGradRows>(dz, z, lse, targets, dloss, begin, valid, local, r0, r1);
    });
    return absl::OkStatus();
  });
}

}  // namespace zeroshard::kernels::cpu
