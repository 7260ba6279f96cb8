#include "cli/schedule.h"

#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/args.h"
#include "cli/layout_suggest.h"
#include "cli/run_config.h"
#include "engine/cost_profile.h"
#include "engine/config_validation.h"
#include "engine/engine_options.h"
#include "engine/pipeline_plan.h"
#include "engine/pipeline_schedule.h"
#include "engine/step_plan.h"

namespace zeroshard::cli {
namespace {

constexpr char kUsage[] =
    "usage: zeroshard schedule CONFIG [--world-size N] [--rank R] [--simulate] [--costs F,B,W]\n"
    "                          [--profile PROFILE [--suggest]] [--set PATH=VALUE ...]\n"
    "\n"
    "Prints the training step program of rank R (default 0) exactly as the engine\n"
    "would run it for CONFIG: one action per line (FORWARD, BACKWARD, GATHER,\n"
    "WAIT_GATHER, RELEASE, REDUCE, WAIT_REDUCE, SEND_ACT, RECV_ACT, OPTIMIZER, ...)\n"
    "with its micro-batch, unit or bucket and bytes; then the actions by kind, the\n"
    "collectives per group and op (calls, bytes this rank sends), and what a dry\n"
    "run of every rank's program predicts (peak gathered units, peak kept\n"
    "activations). Nothing is allocated or communicated. Under a pipeline\n"
    "(engine.parallel.pp > 1) the ranks are dp_rank + dp * stage.\n"
    "--simulate prints instead, per pipeline stage, its schedule's timeline (one\n"
    "character per time step; F, B, W and the micro-batch), bubble fraction and\n"
    "peak in-flight activations, the overall bubble, and the dry run's verdict\n"
    "(a deadlock names the actions that wait on each other). --costs sets one\n"
    "unit's forward, input-gradient and weight-gradient times (default 1,1,1; a\n"
    "chunk costs the sum of its units').\n"
    "--profile reads a cost profile (zeroshard trace TRACE --write-profile\n"
    "PROFILE) and ends the output with the step time it predicts for CONFIG\n"
    "(docs/simulator.md). --suggest prints instead every (dp, tp, pp,\n"
    "micro-batches, schedule) of the world size that fits the memory plan,\n"
    "ranked by predicted step, and the best as --set flags.\n"
    "--world-size checks dp*tp*pp against N ranks (default: $OMPI_COMM_WORLD_SIZE\n"
    "if set); --set overrides one config field (repeatable).\n"
    "Exits 0; 1 when the dry run finds the programs inconsistent or deadlocked; 2\n"
    "for a bad flag, an unreadable or invalid config, or a rank outside [0, world\n"
    "size).\n";

constexpr char kName[] = "zeroshard schedule";

std::string Plural(int64_t n, absl::string_view word) {
  if (n == 1) return absl::StrCat(n, " ", word);
  return absl::StrCat(n, " ", word, absl::EndsWith(word, "ch") ? "es" : "s");
}

struct UnitCosts {
  double forward = 1, input = 1, weight = 1;
};

// "F,B,W": three numbers >= 0, not all 0.
absl::StatusOr<UnitCosts> ParseCosts(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, ',');
  UnitCosts c;
  bool ok = parts.size() == 3 && absl::SimpleAtod(parts[0], &c.forward) && absl::SimpleAtod(parts[1], &c.input) &&
            absl::SimpleAtod(parts[2], &c.weight);
  ok = ok && c.forward >= 0 && c.input >= 0 && c.weight >= 0 && c.forward + c.input + c.weight > 0;
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("--costs: '", text, "' is not three numbers F,B,W >= 0 (not all 0), e.g. 1,1,1"));
  }
  return c;
}

std::string ChunkName(const std::vector<std::string>& units, int begin, int end) {
  return end - begin == 1 ? units[begin] : absl::StrCat(units[begin], "..", units[end - 1]);
}

// The --simulate section: per stage the schedule's timeline, bubble and
// peaks; the overall bubble; the programs' verdict.
std::string FormatSimulation(const std::vector<std::string>& unit_names, const std::vector<int>& chunk_begin,
                             const std::string& partition, PipelineScheduleKind kind, const PipelineShape& shape,
                             const std::vector<std::vector<ChunkOp>>& schedule, const UnitCosts& costs, int dp,
                             const absl::StatusOr<Simulation>& simulation, int* exit_code) {
  std::string out = absl::StrCat("chunks (", partition, "):");
  std::vector<int> sizes;
  for (int c = 0; c + 1 < static_cast<int>(chunk_begin.size()); ++c) {
    sizes.push_back(chunk_begin[c + 1] - chunk_begin[c]);
    absl::StrAppend(&out, c == 0 ? " " : ", ", c, " = ", ChunkName(unit_names, chunk_begin[c], chunk_begin[c + 1]),
                    " (stage ", c % shape.stages, ")");
  }
  absl::StrAppend(&out, "\n");
  ChunkCosts chunk_costs;
  for (int n : sizes) {
    chunk_costs.forward.push_back(n * costs.forward);
    chunk_costs.backward_input.push_back(n * costs.input);
    chunk_costs.backward_weight.push_back(n * costs.weight);
  }
  absl::StatusOr<ScheduleTimeline> t = SimulatePipelineSchedule(schedule, shape, chunk_costs);
  if (!t.ok()) {
    absl::StrAppend(&out, "schedule: ", t.status().ToString(), "\n");
    *exit_code = 1;
    return out;
  }
  // Two characters for the shortest operation.
  double shortest = 0;
  for (const std::vector<TimedOp>& stage : t->stages) {
    for (const TimedOp& op : stage) {
      const double d = op.end - op.start;
      if (d > 0 && (shortest == 0 || d < shortest)) shortest = d;
    }
  }
  const double unit = shortest > 0 ? shortest / 2 : 1;
  absl::StrAppend(&out, PipelineScheduleName(kind), " timeline, per unit F ", costs.forward, " B ", costs.input, " W ",
                  costs.weight, ", one character = ", unit, ":\n", DrawTimeline(*t, unit));
  for (int s = 0; s < shape.stages; ++s) {
    absl::StrAppendFormat(&out, "stage %d: bubble fraction %.4f, peak in-flight activations %d", s, t->bubble[s],
                          t->peak_in_flight[s]);
    if (simulation.ok()) {
      absl::StrAppend(&out, ", peak kept unit activations ", simulation->ranks[s * dp].peak_kept_activations);
    }
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppendFormat(&out, "overall: bubble fraction %.4f, makespan %g\n", t->overall_bubble, t->makespan);
  absl::StrAppend(&out, "step programs of ", Plural(dp * shape.stages, "rank"),
                  " simulated: ", simulation.ok() ? std::string("OK") : simulation.status().ToString(), "\n");
  *exit_code = simulation.ok() ? 0 : 1;
  return out;
}

// The --profile section's lines.
std::string FormatPrediction(const StepTimePrediction& p, const std::string& profile_path) {
  std::string out = absl::StrFormat(
      "predicted step (cost profile %s): %.1f ms; compute %.1f ms, optimizer %.1f ms, collectives %.1f ms, "
      "exposed %.1f ms",
      profile_path, p.step_seconds * 1000, p.compute_seconds * 1000, p.optimizer_seconds * 1000,
      p.comm_seconds * 1000, p.exposed_seconds * 1000);
  if (p.bubble_fraction > 0) absl::StrAppendFormat(&out, ", bubble %.3f", p.bubble_fraction);
  absl::StrAppend(&out, "\n");
  for (const std::string& note : p.notes) absl::StrAppend(&out, "  note: ", note, "\n");
  return out;
}

int RunCommand(int argc, char** argv, std::ostream& out, std::ostream& err) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(
      argc, argv, 1,
      {{"world-size"}, {"rank"}, {"set", true, true}, {"help", false}, {"simulate", false}, {"costs"}, {"profile"},
       {"suggest", false}});
  if (!args.ok()) {
    err << kName << ": " << args.status().message() << "\n" << kUsage;
    return 2;
  }
  if (args->Has("help")) {
    out << kUsage;
    return 0;
  }
  if (args->positional.size() != 1) {
    err << kName << ": expected exactly one config file, got " << args->positional.size() << "\n" << kUsage;
    return 2;
  }
  const std::string& path = args->positional[0];
  int world_size = -1;
  const char* env_world = std::getenv("OMPI_COMM_WORLD_SIZE");
  const std::string world_text = args->Get("world-size", env_world != nullptr ? env_world : "");
  if (!world_text.empty() && (!absl::SimpleAtoi(world_text, &world_size) || world_size < 1)) {
    err << kName << ": --world-size: '" << world_text << "' is not a positive integer\n";
    return 2;
  }
  int rank = 0;
  const std::string rank_text = args->Get("rank", "0");
  if (!absl::SimpleAtoi(rank_text, &rank)) {
    err << kName << ": --rank: '" << rank_text << "' is not an integer\n";
    return 2;
  }
  const bool simulate = args->Has("simulate");
  absl::StatusOr<UnitCosts> costs = ParseCosts(args->Get("costs", "1,1,1"));
  if (!costs.ok()) {
    err << kName << ": " << costs.status().message() << "\n";
    return 2;
  }

  const std::string profile_path = args->Get("profile", "");
  std::optional<CostProfile> profile;
  if (args->Has("profile")) {
    absl::StatusOr<CostProfile> read = ReadCostProfile(profile_path);
    if (!read.ok()) {
      err << kName << ": --profile: " << read.status().message() << "\n";
      return 2;
    }
    profile = *std::move(read);
  }
  if (args->Has("suggest")) {
    if (!profile.has_value()) {
      err << kName << ": --suggest needs --profile PROFILE (zeroshard trace TRACE --write-profile PROFILE)\n";
      return 2;
    }
    if (world_size < 1) {
      err << kName << ": --suggest needs --world-size N (or $OMPI_COMM_WORLD_SIZE)\n";
      return 2;
    }
    absl::StatusOr<std::vector<LayoutChoice>> choices = SuggestLayouts(path, args->GetAll("set"), world_size, *profile);
    if (!choices.ok()) {
      err << choices.status().message() << "\n";
      return 2;
    }
    out << path << ": layouts of " << Plural(world_size, "rank") << " ranked by the step cost profile "
        << profile_path << " predicts (docs/simulator.md)\n"
        << FormatLayoutChoices(*choices);
    for (const LayoutChoice& c : *choices) {
      if (c.feasible) return 0;
    }
    return 1;
  }

  absl::StatusOr<RunConfig> run = LoadRunConfig(path, args->GetAll("set"), world_size);
  if (!run.ok()) {
    err << run.status().message() << "\n";
    return 2;
  }
  const ParallelConfig& parallel = run->engine.parallel();
  const int world = world_size > 0 ? world_size : parallel.dp() * parallel.tp() * parallel.pp();
  if (rank < 0 || rank >= world) {
    err << kName << ": --rank: " << rank << " is outside [0, " << world << ") for a world of " << Plural(world, "rank")
        << "\n";
    return 2;
  }
  absl::StatusOr<EngineOptions> options = EngineOptionsFromConfig(run->engine);
  if (!options.ok()) {
    err << path << ": " << options.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<Model>> model = run->build_model();
  if (!model.ok()) {
    err << path << ": " << model.status().message() << "\n";
    return 2;
  }
  std::string predicted;
  if (profile.has_value()) {
    absl::StatusOr<StepTimePrediction> p = PredictRunStep(*run, *profile);
    if (!p.ok()) {
      err << path << ": --profile " << profile_path << ": " << p.status().message() << "\n";
      return 2;
    }
    predicted = FormatPrediction(*p, profile_path);
  }
  const int dp = parallel.dp();
  const int pp = parallel.pp();
  std::string header = absl::StrCat(path, " (", run->kind, "): ", run->model_summary, "; dp=", dp);
  if (pp > 1) {
    absl::StrAppend(&header, ", pp=", pp);
    if (parallel.virtual_stages() > 1) absl::StrAppend(&header, " x ", parallel.virtual_stages(), " virtual stages");
    absl::StrAppend(&header, " (", ParallelConfig::PipelineSchedule_Name(parallel.pipeline_schedule()), ")");
  }
  absl::StrAppend(&header, ", ZeRO stage ", options->zero.stage(), ", ", Plural(options->accumulation_steps, "micro-batch"));
  if (pp == 1 && options->accumulation_steps > 1) {
    absl::StrAppend(&header, options->reduce_mode == ReduceMode::kDefer ? " (DEFER)" : " (ACCUMULATE)");
  }

  // Hybrid sharding: ZeRO shards over groups of S ("dp" in the program),
  // and each reduced shard is all-reduced over the R = dp / S replicas.
  const int shard = options->sharding.shard_group_size > 0 ? options->sharding.shard_group_size : dp;
  if (shard < dp) absl::StrAppend(&header, ", hybrid sharding over groups of ", shard);
  if (options->sharding.quantize_weights || options->sharding.quantize_gradients) {
    absl::StrAppend(&header, ", int8 ", options->sharding.quantize_weights ? "weights" : "",
                    options->sharding.quantize_weights && options->sharding.quantize_gradients ? " and " : "",
                    options->sharding.quantize_gradients ? "gradients" : "");
  }
  if (pp > 1 && shard < dp) {
    err << kName << ": " << path << ": hybrid sharding with pipeline stages is not simulated; run it with pp 1\n";
    return 2;
  }

  if (pp == 1) {
    absl::StatusOr<StepPlan> plan = PlanDataParallelStep(**model, *options, shard);
    if (!plan.ok()) {
      err << path << ": " << plan.status().message() << "\n";
      return 2;
    }
    // Every dp rank runs its own program (the same one under data
    // parallelism): simulating them all checks that the collectives match up.
    std::vector<SimulatedRank> ranks(dp);
    for (int r = 0; r < dp; ++r) {
      std::vector<int> world, shard_group, replicas;
      for (int q = 0; q < dp; ++q) {
        world.push_back(q);
        if (q / shard == r / shard) shard_group.push_back(q);
        if (q % shard == r % shard) replicas.push_back(q);
      }
      ranks[r].program = plan->train;
      ranks[r].groups = {{"dp", shard_group}};
      if (shard < dp) {
        ranks[r].groups["dp_replica"] = replicas;
        ranks[r].groups["world"] = world;
      }
      ranks[r].gathers_params = options->zero.gathers_params();
    }
    const absl::StatusOr<Simulation> simulation = SimulatePrograms(ranks);
    const StepProgram& program = plan->train;
    if (simulate) {
      // One stage: each micro-batch's forward, then its backward (1F1B at pp 1).
      PipelineShape shape;
      shape.micro_batches = options->accumulation_steps;
      const int units = static_cast<int>(plan->units.size());
      int code = 0;
      const std::string section = FormatSimulation(
          program.names.units, {0, units}, "one stage", PipelineScheduleKind::kOneFOneB, shape,
          *BuildPipelineSchedule(PipelineScheduleKind::kOneFOneB, shape), *costs, dp, simulation, &code);
      out << header << "\n" << section << predicted;
      return code;
    }
    absl::StrAppend(&header, "; train program of rank ", rank, ": ", Plural(program.num_units, "unit"), ", ",
                    Plural(program.num_buckets, "bucket"), ", ", Plural(program.actions.size(), "action"), "\n");
    std::map<std::string, int> sizes;
    for (const auto& [name, members] : ranks[rank].groups) sizes[name] = static_cast<int>(members.size());
    out << header << FormatProgram(program)
        << FormatScheduleSummary(program, sizes, rank, "every dp rank's program simulated", dp, simulation)
        << predicted;
    return simulation.ok() ? 0 : 1;
  }

  // The transfers' bytes are those of this config's micro-batch.
  const MicroBatchShape micro_batch{MicroBatchSize(run->engine, run->global_batch), run->sequence_length};
  absl::StatusOr<PipelinePlan> plan = PlanPipeline(**model, *options, dp, micro_batch);
  if (!plan.ok()) {
    err << path << ": " << plan.status().message() << "\n";
    return 2;
  }
  const std::vector<SimulatedRank> ranks = PipelineSimulatedRanks(*plan, dp, options->zero.gathers_params());
  const absl::StatusOr<Simulation> simulation = SimulatePrograms(ranks);
  if (simulate) {
    int code = 0;
    const std::string section = FormatSimulation(
        plan->stages[0].train.names.units, plan->chunk_begin,
        plan->partitioned_by_cost ? "partitioned by cost" : "engine.parallel.pp_partition",
        options->pipeline.schedule, plan->shape, plan->schedule, *costs, dp, simulation, &code);
    out << header << "\n" << section << predicted;
    return code;
  }
  const int stage = rank / dp;
  const StepProgram& program = plan->stages[stage].train;
  absl::StrAppend(&header, "; train program of rank ", rank, " (stage ", stage, ", dp rank ", rank % dp,
                  "): ", Plural(program.num_units, "unit"), ", ", Plural(program.num_buckets, "bucket"), ", ",
                  Plural(program.actions.size(), "action"), "\n");
  std::map<std::string, int> sizes;
  for (const auto& [name, members] : ranks[rank].groups) sizes[name] = static_cast<int>(members.size());
  out << header << FormatProgram(program)
      << FormatScheduleSummary(program, sizes, rank, "every rank's program simulated", static_cast<int>(ranks.size()),
                               simulation)
      << predicted;
  return simulation.ok() ? 0 : 1;
}

int Run(int argc, char** argv) { return RunCommand(argc, argv, std::cout, std::cerr); }

}  // namespace

const Subcommand kSchedule = {"schedule", "print a config's step program, its collectives and predicted peaks", kUsage,
                              Run};

std::string FormatScheduleSummary(const StepProgram& program, int dp, int rank,
                                  const absl::StatusOr<Simulation>& simulation) {
  return FormatScheduleSummary(program, {{"dp", dp}}, rank, "every dp rank's program simulated", dp, simulation);
}

std::string FormatScheduleSummary(const StepProgram& program, const std::map<std::string, int>& group_sizes, int rank,
                                  const std::string& simulated, int simulated_ranks,
                                  const absl::StatusOr<Simulation>& simulation) {
  std::string out = "actions by kind:\n";
  std::map<ActionKind, int> by_kind;
  for (const Action& a : program.actions) ++by_kind[a.kind];
  for (const auto& [kind, count] : by_kind) absl::StrAppendFormat(&out, "  %-22s %6d\n", ActionKindName(kind), count);
  absl::StrAppendFormat(&out, "  %-22s %6d\n", "total", program.actions.size());

  absl::StrAppend(&out, "collectives per step (calls, bytes this rank sends):\n");
  for (const auto& [key, totals] : CountCollectives(program, group_sizes)) {
    absl::StrAppendFormat(&out, "  %-22s %6d %-5s %12d bytes\n", absl::StrCat(key.first, " ", CommOpName(key.second)),
                          totals.calls, totals.calls == 1 ? "call" : "calls", totals.bytes_sent);
  }
  absl::StrAppendFormat(&out, "  %-22s %6d %-5s %s\n", "control AllGather", 1, "call",
                        "(BEGIN_STEP's batch-signature agreement; control traffic, not counted)");

  absl::StrAppendFormat(&out, "prediction for rank %d (%s, %s):\n", rank, simulated, Plural(simulated_ranks, "rank"));
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

int RunSchedule(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> storage = {"schedule"};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : storage) argv.push_back(a.data());
  return RunCommand(static_cast<int>(argv.size()), argv.data(), out, err);
}

}  // namespace zeroshard::cli
