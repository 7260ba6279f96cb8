#include "kernels/cpu/thread_pool.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace zeroshard::kernels::cpu {
namespace {

thread_local bool t_inside_job = false;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// How long a thread spins for the pool's next event before it gives the core
// away. A bound in time, not in pause instructions: a pause takes from a few
// cycles (Zen 1) to ~140 (Skylake), so a count spun 20x longer on some CPUs,
// burning the core OpenBLAS and the caller need between kernels.
constexpr std::chrono::microseconds kSpinBudget{50};

// Spins until done() or kSpinBudget has passed (the clock read every 64
// pauses); returns done().
template <typename Done>
bool SpinUntil(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinBudget;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

class ThreadPool {
 public:
  // Never destroyed: workers run until the process exits.
  static ThreadPool& Get() {
    static ThreadPool* pool = new ThreadPool();
    return *pool;
  }

  void Run(int threads, int64_t chunks, const std::function<void(int64_t)>& fn) {
    std::unique_lock<std::mutex> submit(submit_mu_, std::try_to_lock);
    if (threads <= 1 || chunks <= 1 || t_inside_job || !submit.owns_lock()) {
      for (int64_t i = 0; i < chunks; ++i) fn(i);
      return;
    }
    EnsureWorkers(threads - 1);
    // Stragglers from the previous job that entered after it closed leave
    // without touching anything; wait for them before resetting counters.
    while (active_.load() != 0) std::this_thread::yield();
    job_ = &fn;
    num_chunks_.store(chunks);
    next_chunk_.store(0);
    done_chunks_.store(0);
    slots_.store(threads - 1);
    open_.store(true);
    {
      std::lock_guard<std::mutex> lock(wake_mu_);
      generation_.fetch_add(1);
    }
    wake_cv_.notify_all();
    t_inside_job = true;
    Work();
    t_inside_job = false;
    // A worker still on a chunk may have been descheduled: after the spin,
    // yield so it can finish on this core.
    if (!SpinUntil([&] { return done_chunks_.load() == chunks; })) {
      while (done_chunks_.load() != chunks) std::this_thread::yield();
    }
    open_.store(false);
    // Workers inside Work() may still be between their last chunk and leaving.
    if (!SpinUntil([&] { return active_.load() == 0; })) {
      while (active_.load() != 0) std::this_thread::yield();
    }
    job_ = nullptr;
  }

 private:
  ThreadPool() = default;

  void EnsureWorkers(int n) {
    while (static_cast<int>(workers_.size()) < n) {
      workers_.emplace_back([this] { WorkerLoop(); });
      workers_.back().detach();
    }
  }

  // Pulls chunks until none are left.
  void Work() {
    const int64_t n = num_chunks_.load();
    for (int64_t i = next_chunk_.fetch_add(1); i < n; i = next_chunk_.fetch_add(1)) {
      (*job_)(i);
      done_chunks_.fetch_add(1);
    }
  }

  void WorkerLoop() {
    t_inside_job = true;  // a worker's chunks never start nested jobs
    uint64_t seen = generation_.load();
    for (;;) {
      // Spin a little (the next kernel usually follows within microseconds),
      // then sleep until a new job is published.
      if (!SpinUntil([&] { return generation_.load() != seen; })) {
        std::unique_lock<std::mutex> lock(wake_mu_);
        wake_cv_.wait(lock, [&] { return generation_.load() != seen; });
      }
      seen = generation_.load();
      active_.fetch_add(1);
      if (open_.load()) {
        int slots = slots_.load();
        while (slots > 0 && !slots_.compare_exchange_weak(slots, slots - 1)) {
        }
        if (slots > 0) Work();
      }
      active_.fetch_sub(1);
    }
  }

  std::mutex submit_mu_;  // one job at a time
  std::vector<std::thread> workers_;  // guarded by submit_mu_

  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  std::atomic<uint64_t> generation_{0};

  const std::function<void(int64_t)>* job_ = nullptr;
  std::atomic<bool> open_{false};     // the job accepts workers
  std::atomic<int> slots_{0};         // workers that may still join
  std::atomic<int> active_{0};        // workers inside a job
  std::atomic<int64_t> num_chunks_{0};
  std::atomic<int64_t> next_chunk_{0};
  std::atomic<int64_t> done_chunks_{0};
};

}  // namespace

void RunChunks(int threads, int64_t chunks, const std::function<void(int64_t)>& fn) {
  ThreadPool::Get().Run(threads, chunks, fn);
}

}  // namespace zeroshard::kernels::cpu
