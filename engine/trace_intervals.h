// Arithmetic over a trace's spans, shared by the trace summary and the cost
// profile: [begin, end) intervals in microseconds, and medians.
#ifndef ZEROSHARD_ENGINE_TRACE_INTERVALS_H_
#define ZEROSHARD_ENGINE_TRACE_INTERVALS_H_

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace zeroshard {

using TraceInterval = std::pair<double, double>;

// The compute thread's computation: forward, backward, recompute and the
// optimizer's update spans.
inline bool IsComputationSpan(const std::string& cat, const std::string& name) {
  return cat == "forward" || cat == "backward" || cat == "recompute" || (cat == "optimizer" && name == "update");
}

// Sorted and disjoint: overlapping or touching intervals merged.
inline std::vector<TraceInterval> UnionOf(std::vector<TraceInterval> v) {
  std::sort(v.begin(), v.end());
  std::vector<TraceInterval> out;
  for (const TraceInterval& i : v) {
    if (!out.empty() && i.first <= out.back().second) {
      out.back().second = std::max(out.back().second, i.second);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

// How much of `x` lies in a UnionOf result.
inline double OverlapWith(const TraceInterval& x, const std::vector<TraceInterval>& sorted_disjoint) {
  double total = 0;
  auto it = std::lower_bound(sorted_disjoint.begin(), sorted_disjoint.end(), TraceInterval{x.first, x.first},
                             [](const TraceInterval& a, const TraceInterval& b) { return a.second < b.first; });
  for (; it != sorted_disjoint.end() && it->first < x.second; ++it) {
    total += std::max(0.0, std::min(x.second, it->second) - std::max(x.first, it->first));
  }
  return total;
}

// The median (the mean of the middle two for an even count); 0 for none.
inline double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_TRACE_INTERVALS_H_
