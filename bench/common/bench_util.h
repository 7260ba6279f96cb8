// Small helpers every benchmark binary uses: exit on a failed status, the
// median of repeated timings, rounding up to a multiple, the ZeRO
// model-state formulas the memory tables compare against, and gathering
// every rank's measurements.
#ifndef ZEROSHARD_BENCH_COMMON_BENCH_UTIL_H_
#define ZEROSHARD_BENCH_COMMON_BENCH_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/communicator.h"

namespace zeroshard::bench {

// Prints "<what>: <message>" and exits 1 unless `s` is OK: a benchmark
// has no caller to return to.
inline void CheckOrExit(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, std::string(s.message()).c_str());
    std::exit(1);
  }
}

// The upper median (the middle element of an odd count); 0 when empty.
inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

inline int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Model-state bytes per rank by category, f32 parameters and gradients,
// AdamW (docs/sharding.md): full buffers hold `full` elements, shards
// `shard`.
struct StateBytes {
  int64_t params = 0, grads = 0, master = 0, optimizer = 0;
  int64_t total() const { return params + grads + master + optimizer; }
};
inline StateBytes ZeroStateBytes(int stage, int64_t full, int64_t shard) {
  constexpr int64_t kF32 = 4;
  StateBytes b;
  b.params = kF32 * (stage == 3 ? shard : full);
  b.grads = kF32 * (stage >= 2 ? shard : full);
  b.master = kF32 * (stage == 0 ? full : shard);
  b.optimizer = 2 * kF32 * (stage == 0 ? full : shard);  // m and v
  return b;
}

// The same summed and without alignment padding, for psi elements sharded
// over n ranks: stage 0: 20Ψ, 1: 8Ψ + 12Ψ/n, 2: 4Ψ + 16Ψ/n, 3: 20Ψ/n.
inline double ZeroStateTheory(int stage, double psi, int n) {
  switch (stage) {
    case 0:
      return 20 * psi;
    case 1:
      return 8 * psi + 12 * psi / n;
    case 2:
      return 4 * psi + 16 * psi / n;
    default:
      return 20 * psi / n;
  }
}

// Every rank's `mine` (the same length on every rank), indexed by rank;
// exits on a failed gather.
std::vector<std::vector<int64_t>> AllRanks(Communicator& world, const std::vector<int64_t>& mine);

}  // namespace zeroshard::bench

#endif  // ZEROSHARD_BENCH_COMMON_BENCH_UTIL_H_
