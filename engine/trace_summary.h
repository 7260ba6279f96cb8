// Reads a timeline trace written by engine/trace_writer.h and sums it up per
// rank: how long the steps took, how long units computed, how long each kind
// of collective ran and how much of that ran under computation (hidden), and
// how long the compute thread sat blocked waiting. `zeroshard trace` prints it.
//
// Computation is the union of the compute thread's forward, backward,
// recompute and optimizer-update spans; a collective's hidden time is its
// comm-thread span intersected with that union.
#ifndef ZEROSHARD_ENGINE_TRACE_SUMMARY_H_
#define ZEROSHARD_ENGINE_TRACE_SUMMARY_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zeroshard {

struct CommSummary {
  int count = 0;
  double ms = 0;         // sum of the spans
  double hidden_ms = 0;  // of which under computation
};

struct RankTraceSummary {
  int rank = 0;
  int steps = 0;
  double median_step_ms = 0;
  double compute_ms = 0;  // union of computation spans
  double blocked_ms = 0;  // sum of "wait" spans
  // By comm category: "gather", "reduce_scatter", "publish", "allreduce".
  std::map<std::string, CommSummary> comm;
};

// kInvalidArgument naming `source` when the text is not a trace of ours
// (not JSON, no traceEvents array, an X event without numeric ts/dur/pid).
absl::StatusOr<std::vector<RankTraceSummary>> SummarizeTrace(absl::string_view json_text,
                                                             absl::string_view source);

// A markdown table, one row per rank.
std::string FormatTraceSummary(const std::vector<RankTraceSummary>& ranks);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_TRACE_SUMMARY_H_
