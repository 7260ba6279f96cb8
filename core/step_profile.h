// Where one thread's time goes, by kind of work, for benchmarks.
//
// Kernel entry points and buffer allocation open a Scope naming their
// category. While a thread has called Start, its scopes charge wall time
// and process CPU time (every thread's, so the kernel pool's workers count
// with the kernel that forked them) to the innermost open scope; time
// outside any scope is kOther. Stop returns the totals, which add up to the
// interval since Start exactly. Scopes on threads that did not call Start
// (and all scopes while nothing is profiled) cost one thread-local load.
#ifndef ZEROSHARD_CORE_STEP_PROFILE_H_
#define ZEROSHARD_CORE_STEP_PROFILE_H_

#include <array>

namespace zeroshard::step_profile {

enum class Category : int {
  kGemm = 0,             // Gemm, the linear layers' products
  kAttention,            // attention kernels (their per-head products included)
  kLayerNorm,
  kGelu,
  kSoftmaxCrossEntropy,  // the head's softmax and cross-entropy
  kElementwise,          // bias, residual adds, accumulation, casts, embedding
  kOptimizer,            // optimizer updates, norms, scaling
  kAllocation,           // buffer allocation, zeroing and freeing
  kOther,                // outside every scope: the step's own code
};
inline constexpr int kNumCategories = static_cast<int>(Category::kOther) + 1;

const char* CategoryName(Category c);

// The category of a kernel entry point by its name (e.g. "LayerNormBackward").
Category CategoryOfKernel(const char* kernel);

struct Totals {
  std::array<double, kNumCategories> wall_s{};
  std::array<double, kNumCategories> cpu_s{};
};

// Starts profiling this thread (totals from zero). Nested Start is an error
// the caller avoids; Stop without Start returns zeros.
void Start();
Totals Stop();

namespace internal {
extern thread_local bool t_profiling;
void Enter(Category c);
void Exit();
}  // namespace internal

class Scope {
 public:
  explicit Scope(Category c) : active_(internal::t_profiling) {
    if (active_) internal::Enter(c);
  }
  explicit Scope(const char* kernel) : active_(internal::t_profiling) {
    if (active_) internal::Enter(CategoryOfKernel(kernel));
  }
  ~Scope() {
    if (active_) internal::Exit();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool active_;
};

}  // namespace zeroshard::step_profile

#endif  // ZEROSHARD_CORE_STEP_PROFILE_H_
