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

// Bytes of optimizer state per parameter element: 8 for AdamW (exp_avg,
// exp_avg_sq), the benchmarks' optimizer. OptimizerStateBytesPerElement
// (sharding/optimizer_registry.h) gives any registered optimizer's.
inline constexpr int64_t kAdamWStateBytesPerElement = 8;

// Model-state bytes per rank by category, f32 parameters and gradients, an
// optimizer keeping K = state_bytes bytes per element (docs/sharding.md):
// full buffers hold `full` elements, shards `shard`.
struct StateBytes {
  int64_t params = 0, grads = 0, master = 0, optimizer = 0;
  int64_t total() const { return params + grads + master + optimizer; }
};
inline StateBytes ZeroStateBytes(int stage, int64_t full, int64_t shard,
                                 int64_t state_bytes = kAdamWStateBytesPerElement) {
  constexpr int64_t kF32 = 4;
  StateBytes b;
  b.params = kF32 * (stage == 3 ? shard : full);
  b.grads = kF32 * (stage >= 2 ? shard : full);
  b.master = kF32 * (stage == 0 ? full : shard);
  b.optimizer = state_bytes * (stage == 0 ? full : shard);
  return b;
}

// The same summed and without alignment padding, for psi elements sharded
// over n ranks: stage 0: (12+K)Ψ, 1: 8Ψ + (4+K)Ψ/n, 2: 4Ψ + (8+K)Ψ/n,
// 3: (12+K)Ψ/n — with AdamW's K = 8: 20Ψ, 8Ψ + 12Ψ/n, 4Ψ + 16Ψ/n, 20Ψ/n.
inline double ZeroStateTheory(int stage, double psi, int n, int64_t state_bytes = kAdamWStateBytesPerElement) {
  const double k = static_cast<double>(state_bytes);
  switch (stage) {
    case 0:
      return (12 + k) * psi;
    case 1:
      return 8 * psi + (4 + k) * psi / n;
    case 2:
      return 4 * psi + (8 + k) * psi / n;
    default:
      return (12 + k) * psi / n;
  }
}

// A tied weight's mirror on another pipeline stage: the compute parameters
// and their gradient only (the owner keeps the master and the optimizer
// state): stages 0-1: 8Ψ, 2: 4Ψ + 4Ψ/n, 3: 8Ψ/n.
inline double ZeroMirrorTheory(int stage, double psi, int n) {
  switch (stage) {
    case 0:
    case 1:
      return 8 * psi;
    case 2:
      return 4 * psi + 4 * psi / n;
    default:
      return 8 * psi / n;
  }
}

// Elements a rank sends over dp per step (k = 1): a reduce-scatter and an
// all-gather of every unit's psi elements, (N-1)/N of each; stage 3 gathers
// for forward and again for backward, less `turnaround` elements, the last
// unit's needs, which stay gathered from its forward to its backward
// (docs/sharding.md, "Communication per step and rank").
inline double ZeroCommTheory(int stage, double psi, int n, double turnaround) {
  return (stage == 3 ? 3 * psi - turnaround : 2 * psi) * (n - 1) / n;
}

// Every rank's `mine` (the same length on every rank), indexed by rank;
// exits on a failed gather.
std::vector<std::vector<int64_t>> AllRanks(Communicator& world, const std::vector<int64_t>& mine);

}  // namespace zeroshard::bench

#endif  // ZEROSHARD_BENCH_COMMON_BENCH_UTIL_H_
