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
#include <atomic>
#include <cstdint>

namespace zeroshard::kernels::cpu {

// Work (roughly element operations, MinWorkPerThread()) below which an extra thread costs more
// than it saves: a fork/join is microseconds when cores are free but can be
// a scheduler time slice when they are not (several ranks per host, builds
// running alongside), so only kernels with real work are threaded.
// Tests lower it (ScopedMinWorkPerThread) to force threading on small inputs.
inline std::atomic<int64_t>& MinWorkPerThread() {
  static std::atomic<int64_t> work{int64_t{1} << 18};
  return work;
}

class ScopedMinWorkPerThread {
 public:
  explicit ScopedMinWorkPerThread(int64_t work) : saved_(MinWorkPerThread().exchange(work)) {}
  ~ScopedMinWorkPerThread() { MinWorkPerThread().store(saved_); }

 private:
  int64_t saved_;
};

// Items per thread so each thread gets at least MinWorkPerThread(), given the
// approximate work of one item.
inline int64_t MinItems(int64_t work_per_item) {
  return std::max<int64_t>(1, MinWorkPerThread().load() / std::max<int64_t>(1, work_per_item));
}

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
