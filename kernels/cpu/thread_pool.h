// The CPU kernels' worker threads: a fork/join pool that stays fast when the
// machine is oversubscribed (several ranks per host, builds alongside).
//
// Run(threads, chunks, fn) calls fn(i) once for every i in [0, chunks). The
// caller works too and pulls chunks from a shared counter; workers that are
// awake join in, workers that are not scheduled yet are not waited for
// (unlike an OpenMP barrier, which waits a whole time slice for them).
// Workers spin briefly (50 us, a bound in time), then sleep on a condition
// variable, so idle workers do not compete for the cores.
//
// Thread-safety: Run may be called from any thread; one job runs at a time
// and a concurrent or nested Run (from inside fn) runs its chunks serially
// on the calling thread. Which thread runs a chunk is unspecified, so fn(i)
// must depend only on i (every kernel partitions its outputs this way).
#ifndef ZEROSHARD_KERNELS_CPU_THREAD_POOL_H_
#define ZEROSHARD_KERNELS_CPU_THREAD_POOL_H_

#include <cstdint>
#include <functional>

namespace zeroshard::kernels::cpu {

// Runs fn(0) ... fn(chunks - 1) on up to `threads` threads (the caller
// included) of the process-wide pool, returning when all have run.
void RunChunks(int threads, int64_t chunks, const std::function<void(int64_t)>& fn);

}  // namespace zeroshard::kernels::cpu

#endif  // ZEROSHARD_KERNELS_CPU_THREAD_POOL_H_
