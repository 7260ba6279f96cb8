#include "engine/cost_profile.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/file_io.h"
#include "engine/trace_intervals.h"
#include "google/protobuf/text_format.h"
#include "nlohmann/json.hpp"

namespace zeroshard {
namespace {

struct UnitSamples {
  std::vector<double> forward, backward, weight, recompute;
};

// One collective as the fit sees it: seconds = hops * latency + wire / bw.
struct LinkSample {
  double hops = 0;
  double wire_bytes = 0;
  double seconds = 0;
};

// Least squares of seconds over (hops, wire_bytes) for latency and 1/bw;
// where that gives a negative term (too few sizes to tell them apart), all
// of the time goes to bandwidth.
LinkCost FitLink(const std::string& group, const std::vector<LinkSample>& samples) {
  double hh = 0, hw = 0, ww = 0, hy = 0, wy = 0, y = 0, w = 0;
  for (const LinkSample& s : samples) {
    hh += s.hops * s.hops;
    hw += s.hops * s.wire_bytes;
    ww += s.wire_bytes * s.wire_bytes;
    hy += s.hops * s.seconds;
    wy += s.wire_bytes * s.seconds;
    y += s.seconds;
    w += s.wire_bytes;
  }
  LinkCost link;
  link.set_group(group);
  link.set_samples(static_cast<int>(samples.size()));
  const double det = hh * ww - hw * hw;
  double latency = -1, inverse_bw = -1;
  if (det > 1e-12 * hh * ww) {
    latency = (hy * ww - hw * wy) / det;
    inverse_bw = (hh * wy - hw * hy) / det;
  }
  if (latency < 0 || inverse_bw <= 0) {
    latency = 0;
    inverse_bw = w > 0 ? y / w : 0;
  }
  link.set_latency_seconds(latency);
  link.set_bytes_per_second(inverse_bw > 0 ? 1 / inverse_bw : 0);
  return link;
}

int OtherInt(const nlohmann::json& other, const char* key, int fallback) {
  if (!other.is_object() || !other.contains(key)) return fallback;
  const nlohmann::json& v = other[key];
  if (v.is_number_integer()) return v.get<int>();
  return fallback;
}

absl::Status CheckNonNegative(const std::string& path, const std::string& field, double value) {
  if (value >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", field, " is ", value, "; expected >= 0"));
}

}  // namespace

double CoreShare::Rate(bool comm_running) const {
  if (cores <= 0) return 1;
  const double runnable = static_cast<double>(std::max(1, ranks)) * (std::max(1, threads) + (comm_running ? 1 : 0));
  return std::min(1.0, cores / runnable);
}

double CollectiveSeconds(absl::string_view op, int64_t bytes_per_rank, int ranks, const LinkCost& link) {
  if (ranks <= 1) return 0;
  const double lat = link.latency_seconds();
  const double inv_bw = link.bytes_per_second() > 0 ? 1 / link.bytes_per_second() : 0;
  const double n = ranks, b = static_cast<double>(bytes_per_rank);
  if (op == "AllGather" || op == "ReduceScatter") return (n - 1) * (lat + b * inv_bw);
  if (op == "AllReduce") return 2 * (n - 1) * (lat + b / n * inv_bw);
  if (op == "AllToAll") return (n - 1) * (lat + b / n * inv_bw);
  if (op == "Broadcast") return (n - 1) * lat + b * inv_bw;
  return lat + b * inv_bw;  // Send, Recv
}

absl::StatusOr<CostProfile> CostProfileFromTrace(absl::string_view json_text, absl::string_view source) {
  const nlohmann::json trace = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (trace.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON"));
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": no \"traceEvents\" array; expected a trace written by engine.logging.trace_path"));
  }
  const nlohmann::json other = trace.contains("otherData") ? trace["otherData"] : nlohmann::json::object();
  const int shard_group = OtherInt(other, "shard_group_size", OtherInt(other, "dp", 1));
  const int tp = OtherInt(other, "tp", 1);

  const CoreShare share{OtherInt(other, "host_cores", 0), OtherInt(other, "ranks_on_host", 1),
                        OtherInt(other, "threads_per_rank", 1)};
  // Each rank's computation and comm-thread spans, for the overlaps.
  std::map<int, std::vector<TraceInterval>> computation, comm;
  auto valid = [](const nlohmann::json& e) {
    return e.is_object() && e.value("ph", "") == "X" && e.contains("ts") && e["ts"].is_number() &&
           e.contains("dur") && e["dur"].is_number() && e.contains("cat") && e["cat"].is_string() &&
           e.contains("name") && e["name"].is_string();
  };
  auto pid_of = [](const nlohmann::json& e) {
    return e.contains("pid") && e["pid"].is_number_integer() ? e["pid"].get<int>() : 0;
  };
  auto tid_of = [](const nlohmann::json& e) {
    return e.contains("tid") && e["tid"].is_number_integer() ? e["tid"].get<int>() : 0;
  };
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (!valid(e)) continue;
    const double ts = e["ts"].get<double>(), dur = e["dur"].get<double>();
    if (tid_of(e) == 1) {
      // A pipeline receive's "wait" on the comm thread blocks; it computes nothing.
      if (e["cat"].get<std::string>() != "wait") comm[pid_of(e)].push_back({ts, ts + dur});
    } else if (IsComputationSpan(e["cat"].get<std::string>(), e["name"].get<std::string>())) {
      computation[pid_of(e)].push_back({ts, ts + dur});
    }
  }
  for (auto& [pid, v] : computation) v = UnionOf(std::move(v));
  for (auto& [pid, v] : comm) v = UnionOf(std::move(v));

  std::map<std::string, UnitSamples> units;
  std::vector<std::string> unit_order;  // first seen, for a stable file
  std::map<int, std::vector<double>> step_seconds;  // by rank
  std::map<std::string, std::vector<LinkSample>> links;
  double update_seconds = 0, update_elements = 0;
  int64_t micro_batch_elements = 0;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (!valid(e)) continue;
    const double ts = e["ts"].get<double>(), dur = e["dur"].get<double>();
    const std::string cat = e["cat"].get<std::string>(), name = e["name"].get<std::string>();
    const nlohmann::json args = e.contains("args") && e["args"].is_object() ? e["args"] : nlohmann::json::object();
    const int pid = pid_of(e);
    // Seconds on a dedicated core: the part of the span the other lane
    // overlapped ran at the shared rate.
    auto work = [&](const std::vector<TraceInterval>& other_lane) {
      const double overlapped = OverlapWith({ts, ts + dur}, other_lane);
      return ((dur - overlapped) * share.Rate(false) + overlapped * share.Rate(true)) * 1e-6;
    };
    if (tid_of(e) == 1) {
      if (absl::StrContains(name, "int8") || absl::StrContains(name, "AllToAll") || !args.contains("bytes") ||
          !args["bytes"].is_number()) {
        continue;
      }
      const double bytes = args["bytes"].get<double>();
      const double seconds = work(computation[pid]);
      if ((cat == "gather" || cat == "reduce_scatter" || cat == "publish") && shard_group > 1) {
        const double n = shard_group;
        links["dp"].push_back({n - 1, (n - 1) / n * bytes, seconds});
      } else if (cat == "tp" && tp > 1 && absl::StartsWith(name, "tp AllReduce")) {
        const double n = tp;
        links["tp"].push_back({2 * (n - 1), 2 * (n - 1) / n * bytes, seconds});
      }
      continue;
    }
    auto unit_sample = [&](absl::string_view prefix) -> std::vector<double>* {
      if (!absl::StartsWith(name, prefix)) return nullptr;
      const std::string unit = name.substr(prefix.size());
      if (unit.empty()) return nullptr;
      if (units.find(unit) == units.end()) unit_order.push_back(unit);
      UnitSamples& u = units[unit];
      if (prefix == "forward ") return &u.forward;
      if (prefix == "backward weight ") return &u.weight;
      if (prefix == "backward ") return &u.backward;
      return &u.recompute;
    };
    std::vector<double>* samples = nullptr;
    if (cat == "forward") {
      samples = unit_sample("forward ");
    } else if (cat == "recompute") {
      samples = unit_sample("recompute ");
    } else if (cat == "backward") {
      samples = absl::StartsWith(name, "backward weight ") ? unit_sample("backward weight ") : unit_sample("backward ");
    } else if (cat == "optimizer" && name == "update" && args.contains("elements") &&
               args["elements"].is_number()) {
      update_seconds += work(comm[pid]);
      update_elements += args["elements"].get<double>();
    } else if (cat == "step") {
      step_seconds[pid].push_back(dur * 1e-6);
      if (args.contains("micro_batch_elements") && args["micro_batch_elements"].is_number_integer()) {
        micro_batch_elements = args["micro_batch_elements"].get<int64_t>();
      }
    }
    if (samples != nullptr) samples->push_back(work(comm[pid]));
  }

  CostProfile profile;
  profile.set_source(std::string(source));
  profile.set_traced_ranks(static_cast<int>(step_seconds.size()));
  profile.set_traced_steps(OtherInt(other, "traced_steps", 0));
  profile.set_zero_stage(OtherInt(other, "zero_stage", 0));
  profile.set_dp(OtherInt(other, "dp", 1));
  profile.set_tp(tp);
  if (other.is_object() && other.contains("compute_dtype") && other["compute_dtype"].is_string()) {
    profile.set_compute_dtype(other["compute_dtype"].get<std::string>());
  }
  profile.set_micro_batch_elements(micro_batch_elements);
  profile.set_host_cores(share.cores);
  profile.set_ranks_on_host(share.ranks);
  profile.set_threads_per_rank(share.threads);
  for (const std::string& name : unit_order) {
    const UnitSamples& s = units[name];
    if (s.forward.empty() || (s.backward.empty() && s.weight.empty())) continue;  // evaluated, or a loose span
    UnitCost* u = profile.add_units();
    u->set_name(name);
    u->set_forward_seconds(MedianOf(s.forward));
    u->set_backward_input_seconds(MedianOf(s.backward));
    u->set_split_measured(!s.weight.empty());
    u->set_backward_weight_seconds(MedianOf(s.weight));
    u->set_recompute_seconds(s.recompute.empty() ? u->forward_seconds() : MedianOf(s.recompute));
  }
  if (profile.units_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": no unit has both \"forward <unit>\" and \"backward <unit>\" spans; trace a training run"));
  }
  if (update_elements <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": no optimizer \"update\" span carries \"elements\"; trace a training run of this "
                             "version of zeroshard"));
  }
  profile.set_optimizer_seconds_per_element(update_seconds / update_elements);
  for (const auto& [group, samples] : links) *profile.add_links() = FitLink(group, samples);
  double slowest = 0;
  for (const auto& [rank, steps] : step_seconds) slowest = std::max(slowest, MedianOf(steps));
  profile.set_measured_step_seconds(slowest);
  return profile;
}

absl::StatusOr<CostProfile> ReadCostProfile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  CostProfile profile;
  if (!google::protobuf::TextFormat::ParseFromString(*text, &profile)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a cost profile in text format (write one with zeroshard trace TRACE "
                           "--write-profile FILE)"));
  }
  if (profile.units_size() == 0) return absl::InvalidArgumentError(absl::StrCat(path, ": no units"));
  for (const UnitCost& u : profile.units()) {
    const std::string at = absl::StrCat("units '", u.name(), "'");
    for (const auto& [field, value] :
         {std::pair<const char*, double>{"forward_seconds", u.forward_seconds()},
          {"backward_input_seconds", u.backward_input_seconds()},
          {"backward_weight_seconds", u.backward_weight_seconds()},
          {"recompute_seconds", u.recompute_seconds()}}) {
      if (absl::Status s = CheckNonNegative(path, absl::StrCat(at, " ", field), value); !s.ok()) return s;
    }
  }
  for (const LinkCost& l : profile.links()) {
    const std::string at = absl::StrCat("links '", l.group(), "'");
    if (absl::Status s = CheckNonNegative(path, at + " latency_seconds", l.latency_seconds()); !s.ok()) return s;
    if (l.bytes_per_second() <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", at, " bytes_per_second is ", l.bytes_per_second(), "; expected > 0"));
    }
  }
  if (absl::Status s = CheckNonNegative(path, "optimizer_seconds_per_element", profile.optimizer_seconds_per_element());
      !s.ok()) {
    return s;
  }
  return profile;
}

absl::Status WriteCostProfile(const CostProfile& profile, const std::string& path) {
  std::string text;
  if (!google::protobuf::TextFormat::PrintToString(profile, &text)) {
    return absl::InternalError(absl::StrCat("cost profile for ", path, " could not be printed"));
  }
  const std::string header =
      "# zeroshard cost profile (proto/cost_profile.proto, docs/simulator.md): measured seconds per unit,\n"
      "# optimizer element and link, read by zeroshard schedule --profile.\n";
  // A reader never sees half a profile, nor loses the old one to a failed write.
  const std::string tmp = path + ".tmp";
  if (absl::Status s = WriteFileDurably(tmp, {header, text}); !s.ok()) return s;
  return RenamePath(tmp, path);
}

const UnitCost* FindUnitCost(const CostProfile& profile, absl::string_view unit) {
  for (const UnitCost& u : profile.units()) {
    if (u.name() == unit) return &u;
  }
  return nullptr;
}

const LinkCost* FindLinkCost(const CostProfile& profile, absl::string_view group) {
  for (const LinkCost& l : profile.links()) {
    if (l.group() == group) return &l;
  }
  return nullptr;
}

}  // namespace zeroshard
