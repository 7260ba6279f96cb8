#include "cli/schedule.h"

#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/args.h"
#include "cli/run_config.h"
#include "engine/engine_options.h"
#include "engine/step_plan.h"

namespace zeroshard::cli {
namespace {

constexpr char kUsage[] =
    "usage: zeroshard schedule CONFIG [--world-size N] [--rank R] [--set PATH=VALUE ...]\n"
    "\n"
    "Prints the training step program of rank R (default 0) exactly as the engine\n"
    "would run it for CONFIG: one action per line (FORWARD, BACKWARD, GATHER,\n"
    "WAIT_GATHER, RELEASE, REDUCE, WAIT_REDUCE, OPTIMIZER, ...) with its\n"
    "micro-batch, unit or bucket and bytes; then the actions by kind, the\n"
    "collectives per group and op (calls, bytes this rank sends), and what a dry\n"
    "run of every dp rank's program predicts (peak gathered units, peak kept\n"
    "activations). Nothing is allocated or communicated.\n"
    "--world-size checks dp*tp*pp against N ranks (default: $OMPI_COMM_WORLD_SIZE\n"
    "if set); --set overrides one config field (repeatable).\n"
    "Exits 0; 1 when the dry run finds the programs inconsistent; 2 for a bad\n"
    "flag, an unreadable or invalid config, or a rank outside [0, world size).\n";

constexpr char kName[] = "zeroshard schedule";

std::string Plural(int64_t n, const char* word) { return absl::StrCat(n, " ", word, n == 1 ? "" : "s"); }

int Run(int argc, char** argv) {
  absl::StatusOr<ParsedArgs> args =
      ParseArgs(argc, argv, 1, {{"world-size"}, {"rank"}, {"set", true, true}, {"help", false}});
  if (!args.ok()) {
    std::cerr << kName << ": " << args.status().message() << "\n" << kUsage;
    return 2;
  }
  if (args->Has("help")) {
    std::cout << kUsage;
    return 0;
  }
  if (args->positional.size() != 1) {
    std::cerr << kName << ": expected exactly one config file, got " << args->positional.size() << "\n" << kUsage;
    return 2;
  }
  const std::string& path = args->positional[0];
  int world_size = -1;
  const char* env_world = std::getenv("OMPI_COMM_WORLD_SIZE");
  const std::string world_text = args->Get("world-size", env_world != nullptr ? env_world : "");
  if (!world_text.empty() && (!absl::SimpleAtoi(world_text, &world_size) || world_size < 1)) {
    std::cerr << kName << ": --world-size: '" << world_text << "' is not a positive integer\n";
    return 2;
  }
  int rank = 0;
  const std::string rank_text = args->Get("rank", "0");
  if (!absl::SimpleAtoi(rank_text, &rank)) {
    std::cerr << kName << ": --rank: '" << rank_text << "' is not an integer\n";
    return 2;
  }

  absl::StatusOr<RunConfig> run = LoadRunConfig(path, args->GetAll("set"), world_size);
  if (!run.ok()) {
    std::cerr << run.status().message() << "\n";
    return 2;
  }
  const ParallelConfig& parallel = run->engine.parallel();
  const int world = world_size > 0 ? world_size : parallel.dp() * parallel.tp() * parallel.pp();
  if (rank < 0 || rank >= world) {
    std::cerr << kName << ": --rank: " << rank << " is outside [0, " << world << ") for a world of "
              << Plural(world, "rank") << "\n";
    return 2;
  }
  absl::StatusOr<EngineOptions> options = EngineOptionsFromConfig(run->engine);
  if (!options.ok()) {
    std::cerr << path << ": " << options.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<Model>> model = run->build_model();
  if (!model.ok()) {
    std::cerr << path << ": " << model.status().message() << "\n";
    return 2;
  }
  const int dp = parallel.dp();
  absl::StatusOr<StepPlan> plan = PlanDataParallelStep(**model, *options, dp);
  if (!plan.ok()) {
    std::cerr << path << ": " << plan.status().message() << "\n";
    return 2;
  }

  // Every dp rank runs its own program (the same one under data
  // parallelism): simulating them all checks that the collectives match up.
  std::vector<int> members;
  for (int r = 0; r < dp; ++r) members.push_back(r);
  std::vector<SimulatedRank> ranks(dp);
  for (SimulatedRank& r : ranks) {
    r.program = plan->train;
    r.groups = {{"dp", members}};
    r.gathers_params = options->stage == 3;
  }
  const absl::StatusOr<Simulation> simulation = SimulatePrograms(ranks);

  const StepProgram& program = plan->train;
  std::string header = absl::StrCat(path, " (", run->kind, "): ", run->model_summary, "; dp=", dp, ", ZeRO stage ",
                                    options->stage, ", ", Plural(program.micro_batches, "micro-batch"));
  if (program.micro_batches > 1) {
    absl::StrAppend(&header, options->reduce_mode == ReduceMode::kDefer ? " (DEFER)" : " (ACCUMULATE)");
  }
  absl::StrAppend(&header, "; train program of rank ", rank, ": ", Plural(program.num_units, "unit"), ", ",
                  Plural(program.num_buckets, "bucket"), ", ", Plural(program.actions.size(), "action"), "\n");
  std::cout << header << FormatProgram(program) << FormatScheduleSummary(program, dp, rank, simulation);
  return simulation.ok() ? 0 : 1;
}

}  // namespace

const Subcommand kSchedule = {"schedule", "print a config's step program, its collectives and predicted peaks",
                              kUsage, Run};

std::string FormatScheduleSummary(const StepProgram& program, int dp, int rank,
                                  const absl::StatusOr<Simulation>& simulation) {
  std::string out = "actions by kind:\n";
  std::map<ActionKind, int> by_kind;
  for (const Action& a : program.actions) ++by_kind[a.kind];
  for (const auto& [kind, count] : by_kind) absl::StrAppendFormat(&out, "  %-22s %6d\n", ActionKindName(kind), count);
  absl::StrAppendFormat(&out, "  %-22s %6d\n", "total", program.actions.size());

  absl::StrAppend(&out, "collectives per step (calls, bytes this rank sends):\n");
  for (const auto& [key, totals] : CountCollectives(program, {{"dp", dp}})) {
    absl::StrAppendFormat(&out, "  %-22s %6d %-5s %12d bytes\n", absl::StrCat(key.first, " ", CommOpName(key.second)),
                          totals.calls, totals.calls == 1 ? "call" : "calls", totals.bytes_sent);
  }
  absl::StrAppendFormat(&out, "  %-22s %6d %-5s %s\n", "control AllGather", 1, "call",
                        "(the batch-signature agreement starting every step; not in the program)");

  absl::StrAppendFormat(&out, "prediction for rank %d (every dp rank's program simulated, %s):\n", rank,
                        Plural(dp, "rank"));
  if (!simulation.ok()) {
    absl::StrAppend(&out, "  verdict: ", simulation.status().ToString(), "\n");
    return out;
  }
  const RankPrediction& p = simulation->ranks[rank];
  absl::StrAppendFormat(&out, "  %-22s %6d\n", "peak gathered units", p.peak_gathered_units);
  absl::StrAppendFormat(&out, "  %-22s %6d\n", "peak kept activations", p.peak_kept_activations);
  absl::StrAppend(&out, "  verdict: OK\n");
  return out;
}

}  // namespace zeroshard::cli
