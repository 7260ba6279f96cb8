#include "core/step_profile.h"

#include <time.h>

#include <cstring>

namespace zeroshard::step_profile {
namespace internal {
thread_local bool t_profiling = false;
}  // namespace internal

namespace {

constexpr int kMaxDepth = 32;

struct ThreadState {
  Totals totals;
  Category stack[kMaxDepth];
  int depth = 0;  // scopes open; deeper ones than kMaxDepth charge the deepest recorded
  double last_wall = 0, last_cpu = 0;
};
thread_local ThreadState t_state;

double Clock(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Charges the time since the last mark to the innermost open scope.
void Mark() {
  const double wall = Clock(CLOCK_MONOTONIC), cpu = Clock(CLOCK_PROCESS_CPUTIME_ID);
  ThreadState& s = t_state;
  const int top = s.depth == 0 ? static_cast<int>(Category::kOther)
                               : static_cast<int>(s.stack[(s.depth < kMaxDepth ? s.depth : kMaxDepth) - 1]);
  s.totals.wall_s[top] += wall - s.last_wall;
  s.totals.cpu_s[top] += cpu - s.last_cpu;
  s.last_wall = wall;
  s.last_cpu = cpu;
}

bool StartsWith(const char* s, const char* prefix) { return std::strncmp(s, prefix, std::strlen(prefix)) == 0; }

}  // namespace

const char* CategoryName(Category c) {
  switch (c) {
    case Category::kGemm: return "GEMM";
    case Category::kAttention: return "attention (non-GEMM and its per-head GEMMs)";
    case Category::kLayerNorm: return "LayerNorm";
    case Category::kGelu: return "GELU";
    case Category::kSoftmaxCrossEntropy: return "softmax / cross-entropy";
    case Category::kElementwise: return "elementwise / residual / bias";
    case Category::kOptimizer: return "optimizer";
    case Category::kAllocation: return "allocation / zeroing";
    case Category::kOther: return "executor overhead / other";
  }
  return "?";
}

Category CategoryOfKernel(const char* kernel) {
  if (StartsWith(kernel, "Gemm") || StartsWith(kernel, "Linear")) return Category::kGemm;
  if (StartsWith(kernel, "Attention")) return Category::kAttention;
  if (StartsWith(kernel, "LayerNorm")) return Category::kLayerNorm;
  if (StartsWith(kernel, "Gelu")) return Category::kGelu;
  if (StartsWith(kernel, "CrossEntropy") || StartsWith(kernel, "Softmax") || StartsWith(kernel, "VocabParallel")) {
    return Category::kSoftmaxCrossEntropy;
  }
  if (StartsWith(kernel, "AdamW") || StartsWith(kernel, "Lion") || StartsWith(kernel, "SumOfSquares") ||
      StartsWith(kernel, "ScaleInPlace")) {
    return Category::kOptimizer;
  }
  return Category::kElementwise;
}

void Start() {
  t_state = ThreadState();
  t_state.last_wall = Clock(CLOCK_MONOTONIC);
  t_state.last_cpu = Clock(CLOCK_PROCESS_CPUTIME_ID);
  internal::t_profiling = true;
}

Totals Stop() {
  if (!internal::t_profiling) return Totals();
  Mark();
  internal::t_profiling = false;
  return t_state.totals;
}

namespace internal {

void Enter(Category c) {
  Mark();
  ThreadState& s = t_state;
  if (s.depth < kMaxDepth) s.stack[s.depth] = c;
  ++s.depth;
}

void Exit() {
  Mark();
  if (t_state.depth > 0) --t_state.depth;
}

}  // namespace internal
}  // namespace zeroshard::step_profile
