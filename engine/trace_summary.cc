#include "engine/trace_summary.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/straggler_report.h"
#include "engine/trace_intervals.h"
#include "nlohmann/json.hpp"

namespace zeroshard {
namespace {

using Interval = TraceInterval;

struct RankSpans {
  std::vector<Interval> computation;
  std::vector<double> step_us;
  double blocked_us = 0;
  std::vector<std::pair<std::string, Interval>> comm;  // category, span
};

}  // namespace

absl::StatusOr<std::vector<RankTraceSummary>> SummarizeTrace(absl::string_view json_text, absl::string_view source) {
  const nlohmann::json trace = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (trace.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON"));
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": no \"traceEvents\" array; expected a trace written by engine.logging.trace_path"));
  }
  std::map<int, RankSpans> ranks;
  int index = -1;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    ++index;
    if (!e.is_object() || !e.contains("ph") || !e.contains("pid") || !e["pid"].is_number_integer()) continue;
    RankSpans& r = ranks[e["pid"].get<int>()];
    if (e["ph"] != "X") continue;
    if (!e.contains("ts") || !e["ts"].is_number() || !e.contains("dur") || !e["dur"].is_number() ||
        !e.contains("tid") || !e["tid"].is_number_integer() || !e.contains("cat") || !e["cat"].is_string() ||
        !e.contains("name") || !e["name"].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": traceEvents[", index,
                                                     "] is an \"X\" event without numeric ts, dur, tid or string cat, "
                                                     "name: ",
                                                     e.dump()));
    }
    const double ts = e["ts"].get<double>(), dur = e["dur"].get<double>();
    const std::string cat = e["cat"].get<std::string>(), name = e["name"].get<std::string>();
    if (e["tid"].get<int>() == 1) {
      r.comm.push_back({cat, {ts, ts + dur}});
    } else if (IsComputationSpan(cat, name)) {
      r.computation.push_back({ts, ts + dur});
    } else if (cat == "step") {
      r.step_us.push_back(dur);
    } else if (cat == "wait") {
      r.blocked_us += dur;
    }
  }
  std::vector<RankTraceSummary> out;
  for (auto& [rank, spans] : ranks) {
    RankTraceSummary s;
    s.rank = rank;
    s.steps = static_cast<int>(spans.step_us.size());
    s.median_step_ms = MedianOf(spans.step_us) / 1000;
    const std::vector<Interval> computation = UnionOf(spans.computation);
    for (const Interval& i : computation) s.compute_ms += (i.second - i.first) / 1000;
    s.blocked_ms = spans.blocked_us / 1000;
    for (const auto& [cat, span] : spans.comm) {
      CommSummary& c = s.comm[cat];
      ++c.count;
      c.ms += (span.second - span.first) / 1000;
      c.hidden_ms += OverlapWith(span, computation) / 1000;
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string FormatTraceSummary(const std::vector<RankTraceSummary>& ranks) {
  std::string out =
      "| rank | steps | step ms (median) | compute ms | gathers: n, ms (hidden) | reduce-scatters: n, ms (hidden) | "
      "other collectives: n, ms (hidden) | blocked in waits ms |\n|---|---|---|---|---|---|---|---|\n";
  auto cell = [](const CommSummary& c) {
    if (c.count == 0) return std::string("-");
    return absl::StrFormat("%d, %.1f (%.0f%%)", c.count, c.ms, c.ms > 0 ? 100 * c.hidden_ms / c.ms : 0.0);
  };
  for (const RankTraceSummary& r : ranks) {
    CommSummary other;
    for (const auto& [cat, c] : r.comm) {
      if (cat == "gather" || cat == "reduce_scatter") continue;
      other.count += c.count;
      other.ms += c.ms;
      other.hidden_ms += c.hidden_ms;
    }
    auto find = [&](const char* cat) {
      auto it = r.comm.find(cat);
      return it == r.comm.end() ? CommSummary() : it->second;
    };
    absl::StrAppendFormat(&out, "| %d | %d | %.1f | %.1f | %s | %s | %s | %.1f |\n", r.rank, r.steps, r.median_step_ms,
                          r.compute_ms, cell(find("gather")), cell(find("reduce_scatter")), cell(other), r.blocked_ms);
  }
  // As the metrics' "straggler", over the traced steps' computation spans.
  std::vector<double> busy;
  for (const RankTraceSummary& r : ranks) busy.push_back(r.compute_ms);
  const StragglerReport s = SlowestOf(busy);
  if (!ranks.empty()) {
    absl::StrAppendFormat(&out, "\nstraggler: slowest rank %d, %.1f ms compute vs median %.1f ms%s\n",
                          ranks[s.slowest_rank].rank, s.slowest_ms, s.median_ms,
                          s.Notable() ? " (more than 20% above the median)" : "");
  }
  return out;
}

}  // namespace zeroshard
