// Static work partitioning over OpenMP threads for the CPU kernels.
//
// ParallelFor splits [0, n) into `threads` contiguous blocks. Kernels only
// partition independent outputs (elements, rows, columns, heads) this way and
// never split one reduction across threads, which is what makes them
// bitwise thread-count independent.
#ifndef ZEROSHARD_KERNELS_CPU_PARALLEL_H_
#define ZEROSHARD_KERNELS_CPU_PARALLEL_H_

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace zeroshard::kernels::cpu {

// Calls fn(begin, end) on disjoint blocks covering [0, n). Uses fewer threads
// when each would get fewer than `min_per_thread` items (spawning costs more
// than it saves).
template <typename Fn>
void ParallelFor(int threads, int64_t n, int64_t min_per_thread, Fn&& fn) {
  if (n <= 0) return;
  int64_t useful = std::max<int64_t>(1, n / std::max<int64_t>(1, min_per_thread));
  int t = static_cast<int>(std::min<int64_t>(threads, useful));
  if (t <= 1) {
    fn(int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(t)
  {
    int id = omp_get_thread_num();
    int nt = omp_get_num_threads();
    int64_t begin = n * id / nt;
    int64_t end = n * (id + 1) / nt;
    if (begin < end) fn(begin, end);
  }
}

}  // namespace zeroshard::kernels::cpu

#endif  // ZEROSHARD_KERNELS_CPU_PARALLEL_H_
