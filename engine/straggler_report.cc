#include "engine/straggler_report.h"

#include <algorithm>

namespace zeroshard {

StragglerReport SlowestOf(const std::vector<double>& compute_ms) {
  StragglerReport r;
  if (compute_ms.empty()) return r;
  for (int i = 0; i < static_cast<int>(compute_ms.size()); ++i) {
    if (compute_ms[i] > compute_ms[r.slowest_rank]) r.slowest_rank = i;
  }
  r.slowest_ms = compute_ms[r.slowest_rank];
  std::vector<double> sorted = compute_ms;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  r.median_ms = n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  return r;
}

}  // namespace zeroshard
