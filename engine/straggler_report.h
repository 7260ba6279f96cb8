// The slowest of a group's compute times against their median: what the
// metrics' "straggler" record, the progress line and `zeroshard trace`
// report (docs/metrics.md).
#ifndef ZEROSHARD_ENGINE_STRAGGLER_REPORT_H_
#define ZEROSHARD_ENGINE_STRAGGLER_REPORT_H_

#include <vector>

namespace zeroshard {

struct StragglerReport {
  int slowest_rank = 0;  // index with the most compute (lowest on ties)
  double slowest_ms = 0;
  double median_ms = 0;  // of every rank's (the mean of the middle two for an even count)
  // Whether the slowest is more than 20% above the median: worth naming.
  bool Notable() const { return slowest_ms > 1.2 * median_ms; }
};

// Of compute_ms[rank]; an empty input gives the zero report.
StragglerReport SlowestOf(const std::vector<double>& compute_ms);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_STRAGGLER_REPORT_H_
