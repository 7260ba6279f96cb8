#include "kernels/cpu/thread_pool.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/parallel.h"

namespace zeroshard::kernels::cpu {
namespace {

TEST(ThreadPool, EveryChunkRunsExactlyOnce) {
  for (int threads : {1, 2, 4}) {
    for (int64_t chunks : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{1000}}) {
      std::vector<std::atomic<int>> hits(chunks);
      RunChunks(threads, chunks, [&](int64_t i) { hits[i].fetch_add(1); });
      for (int64_t i = 0; i < chunks; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " threads, chunk " << i;
    }
  }
}

TEST(ThreadPool, ManyJobsInARowAndNestedJobs) {
  std::atomic<int64_t> total{0};
  for (int job = 0; job < 2000; ++job) {
    RunChunks(3, 5, [&](int64_t i) {
      // A nested job runs serially on this thread.
      RunChunks(3, 2, [&](int64_t j) { total.fetch_add(i * 10 + j); });
    });
  }
  // Per job: sum over i<5, j<2 of (10i + j) = 2*10*10 + 5*1 = 205.
  EXPECT_EQ(total.load(), 2000 * 205);
}

TEST(ThreadPool, ConcurrentCallersEachCompleteTheirJobs) {
  std::vector<std::thread> callers;
  std::atomic<int64_t> sums[3] = {0, 0, 0};
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&, c] {
      for (int job = 0; job < 300; ++job) RunChunks(2, 16, [&](int64_t i) { sums[c].fetch_add(i); });
    });
  }
  for (auto& t : callers) t.join();
  for (auto& s : sums) EXPECT_EQ(s.load(), 300 * 120);
}

TEST(ParallelFor, BlocksCoverTheRangeOnce) {
  ScopedMinWorkPerThread force_threads(1);
  std::vector<int> seen(1001, 0);
  ParallelFor(3, 1001, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ++seen[i];
  });
  for (int v : seen) ASSERT_EQ(v, 1);
}

}  // namespace
}  // namespace zeroshard::kernels::cpu
