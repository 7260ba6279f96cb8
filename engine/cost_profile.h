// The measured costs the step-time model prices layouts with
// (proto/cost_profile.proto, docs/simulator.md): built from a timeline
// trace of a short run (engine.logging.trace_path), saved as text, read back
// by `zeroshard schedule --profile`.
//
// From the trace:
//   * per unit (by name, pooled over ranks, steps and micro-batches), the
//     median of its "forward", "backward", "backward weight" and
//     "recompute" spans; a unit with "backward weight" spans had its
//     backward split, and then "backward" is the input half;
//   * the optimizer's seconds per element: the update spans' total time
//     over their total "elements";
//   * per group, a link fitted by least squares to the comm thread's
//     collectives, a ring of n ranks costing (n - 1)(latency + B / (n bw))
//     for an all-gather or reduce-scatter of B bytes in all and twice that
//     for an all-reduce: "dp" from the gathers, reduce-scatters and
//     publishes over the shard group, "tp" from the tp all-reduces.
//     Quantized collectives and the scalar all-reduces are left out;
//   * the step: the slowest rank's median "step" span.
// Every cost is seconds on a dedicated core: the part of a span that the
// same rank's other lane (comm thread, or computation) overlapped counts at
// CoreShare::Rate(true) of the host the trace records (host_cores,
// ranks_on_host, threads_per_rank), the rest at Rate(false).
#ifndef ZEROSHARD_ENGINE_COST_PROFILE_H_
#define ZEROSHARD_ENGINE_COST_PROFILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/cost_profile.pb.h"

namespace zeroshard {

// How fast a thread runs when `ranks` ranks of `threads` compute threads
// each (and, while it runs, each rank's comm thread) share `cores`: the
// share of a core each runnable thread gets, at most 1; 1 when cores is 0
// (unknown, or a GPU device).
struct CoreShare {
  int cores = 0;
  int ranks = 1;
  int threads = 1;
  double Rate(bool comm_running) const;
};

// kInvalidArgument naming `source` when the text is not one of our traces
// or holds no unit's forward and backward spans, or no optimizer update
// with its "elements" (a trace of a run that did not train).
absl::StatusOr<CostProfile> CostProfileFromTrace(absl::string_view json_text, absl::string_view source);

// Text format. Reading: kInvalidArgument naming the path and the parser's
// line for malformed text, or the field for a negative or missing cost.
// Writing goes through a temporary file and a rename.
absl::StatusOr<CostProfile> ReadCostProfile(const std::string& path);
absl::Status WriteCostProfile(const CostProfile& profile, const std::string& path);

// Null when absent.
const UnitCost* FindUnitCost(const CostProfile& profile, absl::string_view unit);
const LinkCost* FindLinkCost(const CostProfile& profile, absl::string_view group);

// A collective of `op` ("AllGather", "ReduceScatter", "AllReduce",
// "Broadcast", "AllToAll", "Send", "Recv") over `ranks` ranks moving
// `bytes_per_rank` (CommStats' convention: AllGather's input,
// ReduceScatter's output, the AllReduce / Send buffer) on `link`: the ring
// costs above; point-to-point latency + bytes / bandwidth; 0 for one rank.
double CollectiveSeconds(absl::string_view op, int64_t bytes_per_rank, int ranks, const LinkCost& link);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_COST_PROFILE_H_
