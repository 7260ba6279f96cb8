#include "nn/param_init.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/hash.h"

namespace zeroshard {
namespace {

// Uniform in (0, 1]: never 0, so log() in Box-Muller is finite.
double Uniform(uint64_t key, uint64_t counter) {
  const uint64_t bits = Mix64(key + 0x9e3779b97f4a7c15ull * (counter + 1));
  return static_cast<double>((bits >> 11) + 1) * 0x1.0p-53;
}

}  // namespace

namespace {

// Logical elements [begin, end) of the unpadded tensor into out.
void InitLogicalSlice(const ParamSpec& spec, uint64_t seed, int64_t begin, int64_t end, float* out) {
  float constant = 0.0f;
  switch (spec.init) {
    case InitKind::kZeros:
      constant = 0.0f;
      break;
    case InitKind::kOnes:
      constant = 1.0f;
      break;
    case InitKind::kNormal: {
      const uint64_t key = Mix64(seed ^ Mix64(Fnv1a64(spec.name)));
      constexpr double kTwoPi = 6.283185307179586476925286766559;
      for (int64_t i = begin; i < end; ++i) {
        // Elements 2p and 2p+1 are the two outputs of one Box-Muller pair.
        const uint64_t pair = static_cast<uint64_t>(i / 2);
        const double r = std::sqrt(-2.0 * std::log(Uniform(key, 2 * pair)));
        const double theta = kTwoPi * Uniform(key, 2 * pair + 1);
        const double z = (i % 2 == 0) ? r * std::cos(theta) : r * std::sin(theta);
        out[i - begin] = static_cast<float>(z * static_cast<double>(spec.init_std));
      }
      return;
    }
  }
  for (int64_t i = begin; i < end; ++i) out[i - begin] = constant;
}

}  // namespace

void InitParamSlice(const ParamSpec& spec, uint64_t seed, int64_t begin, int64_t end, float* out) {
  if (!spec.padded()) {
    InitLogicalSlice(spec, seed, begin, end, out);
    return;
  }
  // Real elements take the value of the logical element they are (the same
  // index when only dimension 0 is padded); padding is 0.
  std::fill(out, out + (end - begin), 0.0f);
  for (const GlobalRun& run : LogicalToGlobalRuns(spec)) {
    const int64_t lo = std::max(begin, run.global_begin);
    const int64_t hi = std::min(end, run.global_begin + run.length);
    if (lo >= hi) continue;
    const int64_t logical = run.local_begin + (lo - run.global_begin);
    InitLogicalSlice(spec, seed, logical, logical + (hi - lo), out + (lo - begin));
  }
}

void InitLocalParamSlice(const ParamSpec& spec, uint64_t seed, int tp_rank, int tp_size, int64_t begin, int64_t end,
                         float* out) {
  for (const GlobalRun& run : LocalToGlobalRuns(spec, tp_rank, tp_size)) {
    const int64_t lo = std::max(begin, run.local_begin);
    const int64_t hi = std::min(end, run.local_begin + run.length);
    if (lo >= hi) continue;
    const int64_t global = run.global_begin + (lo - run.local_begin);
    InitParamSlice(spec, seed, global, global + (hi - lo), out + (lo - begin));
  }
}

void InitParam(const ParamSpec& spec, uint64_t seed, float* out) {
  InitParamSlice(spec, seed, 0, spec.numel(), out);
}

}  // namespace zeroshard
