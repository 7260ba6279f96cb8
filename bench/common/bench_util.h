// Small helpers every benchmark binary uses: exit on a failed status, the
// median of repeated timings, rounding up to a multiple.
#ifndef ZEROSHARD_BENCH_COMMON_BENCH_UTIL_H_
#define ZEROSHARD_BENCH_COMMON_BENCH_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"

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

}  // namespace zeroshard::bench

#endif  // ZEROSHARD_BENCH_COMMON_BENCH_UTIL_H_
