// What `zeroshard schedule --profile` and `--suggest` compute
// (docs/simulator.md): a config's predicted step time under a cost profile,
// and the feasible layouts of a world size ranked by it.
#ifndef ZEROSHARD_CLI_LAYOUT_SUGGEST_H_
#define ZEROSHARD_CLI_LAYOUT_SUGGEST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/run_config.h"
#include "engine/step_time_model.h"
#include "proto/cost_profile.pb.h"

namespace zeroshard::cli {

// The step of `run` as engine/step_time_model.h prices it: its plan (the
// pipeline's for pp > 1), its micro-batch and tp scaling the profile's
// compute. A tp other than the profile's adds a note: the collectives
// inside the units are then not priced.
absl::StatusOr<StepTimePrediction> PredictRunStep(const RunConfig& run, const CostProfile& profile);

// One layout tried for --suggest: the --set flags that make it from the
// config, and what came of it.
struct LayoutChoice {
  int dp = 1, tp = 1, pp = 1, micro_batches = 1, virtual_stages = 1;
  std::string schedule;  // "-" for pp 1
  std::string offload;   // the config's offload tiers, e.g. "none", "optimizer_state NVME"
  std::vector<std::string> sets;
  bool feasible = false;
  bool priced = false;  // feasible and every part of its step priced by the profile
  std::string verdict;  // why not, for an infeasible one; the notes otherwise
  StepTimePrediction prediction;
};

// Every (dp, tp, pp, micro-batches, schedule) of `world` ranks over the
// config at `path` with `overrides`, keeping its global batch: the
// micro-batch counts dividing the per-replica batch up to 16 (and the
// config's own), every schedule the pipeline accepts (interleaved with 2
// virtual stages). Feasible: the config validates, the model partitions,
// and the memory plan fits the limit (check-config's). Ranked: feasible and
// priced by predicted step, then feasible but not fully priced, then the
// rest. kInvalidArgument when the config itself does not load.
absl::StatusOr<std::vector<LayoutChoice>> SuggestLayouts(const std::string& path,
                                                         const std::vector<std::string>& overrides, int world,
                                                         const CostProfile& profile);

// The ranked table (Markdown) and, when a layout is feasible and priced, a
// last line "best: --set ... --set ...".
std::string FormatLayoutChoices(const std::vector<LayoutChoice>& choices);

}  // namespace zeroshard::cli

#endif  // ZEROSHARD_CLI_LAYOUT_SUGGEST_H_
