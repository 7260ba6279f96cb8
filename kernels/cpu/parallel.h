// Work partitioning for the CPU kernels over the kernel thread pool.
//
// ParallelFor splits [0, n) into contiguous blocks. Kernels only
// partition independent outputs (elements, rows, columns, heads) this way and
// never split one reduction across threads, which is what makes them
// bitwise thread-count independent.
#ifndef ZEROSHARD_KERNELS_CPU_PARALLEL_H_
#define ZEROSHARD_KERNELS_CPU_PARALLEL_H_

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "kernels/cpu/thread_pool.h"

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

// Calls fn(begin, end) on disjoint blocks covering [0, n), on up to
// `threads` threads of the kernel thread pool. Uses fewer threads when each
// would get fewer than `min_per_thread` items. Blocks are a few per thread
// so whichever threads are running share the work.
template <typename Fn>
void ParallelFor(int threads, int64_t n, int64_t min_per_thread, Fn&& fn) {
  if (n <= 0) return;
  const int64_t useful = std::max<int64_t>(1, n / std::max<int64_t>(1, min_per_thread));
  const int t = static_cast<int>(std::min<int64_t>(threads, useful));
  if (t <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  const int64_t chunks = std::min<int64_t>(useful, 4 * static_cast<int64_t>(t));
  RunChunks(t, chunks, [&](int64_t i) {
    const int64_t begin = n * i / chunks, end = n * (i + 1) / chunks;
    if (begin < end) fn(begin, end);
  });
}

}  // namespace zeroshard::kernels::cpu

#endif  // ZEROSHARD_KERNELS_CPU_PARALLEL_H_
