#include "cli/check_config.h"

#include <cstdlib>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"
#include "core/args.h"
#include "cli/run_config.h"
#include "engine/config_validation.h"
#include "engine/engine_options.h"
#include "engine/memory_plan.h"
#include "engine/step_plan.h"
#include "kernels/context.h"

namespace zeroshard::cli {
namespace {

constexpr char kUsage[] =
    "usage: zeroshard check-config FILE [--world-size N] [--set PATH=VALUE ...]\n"
    "\n"
    "Parses and validates a run config (.pbtxt) of any kind: the file's\n"
    "'# proto-message:' header names its message (none: zeroshard.TrainConfig,\n"
    "GPT-2). --set overrides one field\n"
    "after parsing (repeatable), e.g. --set engine.zero.stage=2. --world-size\n"
    "checks dp*tp*pp against N ranks (default: $OMPI_COMM_WORLD_SIZE if set).\n"
    "Prints a normalized summary and each rank's memory plan (docs/offload.md)\n"
    "and exits 0; prints every error and exits 2; exits 3 when a rank's plan\n"
    "exceeds its memory limit (engine.memory_limit_mib, or the host's available\n"
    "memory divided among the ranks on it: $OMPI_COMM_WORLD_LOCAL_SIZE,\n"
    "$SLURM_NTASKS_PER_NODE, else every rank of --world-size).\n";

int Run(int argc, char** argv) {
  absl::StatusOr<ParsedArgs> args =
      ParseArgs(argc, argv, 1, {{"world-size"}, {"set", true, true}, {"help", false}});
  if (!args.ok()) {
    std::cerr << "zeroshard check-config: " << args.status().message() << "\n" << kUsage;
    return 2;
  }
  if (args->Has("help")) {
    std::cout << kUsage;
    return 0;
  }
  if (args->positional.size() != 1) {
    std::cerr << "zeroshard check-config: expected exactly one config file, got " << args->positional.size() << "\n"
              << kUsage;
    return 2;
  }
  int world_size = -1;
  std::string world_text = args->Get("world-size", std::getenv("OMPI_COMM_WORLD_SIZE") ? std::getenv("OMPI_COMM_WORLD_SIZE") : "");
  if (!world_text.empty() && (!absl::SimpleAtoi(world_text, &world_size) || world_size < 1)) {
    std::cerr << "zeroshard check-config: --world-size: '" << world_text << "' is not a positive integer\n";
    return 2;
  }
  absl::StatusOr<RunConfig> config = LoadRunConfig(args->positional[0], args->GetAll("set"), world_size);
  if (!config.ok()) {
    std::cerr << config.status().message() << "\n";
    return 2;
  }
  // The environment the run would start in: its error is the engine's.
  if (const absl::Status isa = kernels::ConfigureCpuVectorIsa(); !isa.ok()) {
    std::cerr << "zeroshard check-config: " << isa.message() << "\n";
    return 2;
  }
  std::cout << ConfigSummary(*config, world_size);
  absl::StatusOr<EngineOptions> options = EngineOptionsFromConfig(config->engine);
  if (!options.ok()) {
    std::cerr << args->positional[0] << ": " << options.status().message() << "\n";
    return 2;
  }
  // Without a launcher's count, every rank of the job runs on this host.
  const int ranks_on_host = RanksOnHost(world_size > 0 ? world_size : 1);
  absl::StatusOr<int64_t> limit = ResolveMemoryLimit(*options, ranks_on_host);
  if (!limit.ok()) {
    std::cerr << args->positional[0] << ": " << limit.status().message() << "\n";
    return 2;
  }
  std::string report;
  const absl::Status planned = MemoryPlanReport(*config, world_size, *limit, &report);
  std::cout << "--- memory plan (limit " << FormatGiB(*limit) << " per rank"
            << (options->memory_limit_bytes > 0 ? std::string(", engine.memory_limit_mib")
                                                : absl::StrCat(", the host's available memory / ", ranks_on_host,
                                                               " rank", ranks_on_host == 1 ? "" : "s"))
            << ") ---\n"
            << report;
  if (!planned.ok()) {
    std::cerr << args->positional[0] << ": " << planned.message() << "\n";
    return planned.code() == absl::StatusCode::kResourceExhausted ? 3 : 2;
  }
  return 0;
}

}  // namespace

const Subcommand kCheckConfig = {"check-config", "validate a .pbtxt run config and print its normalized form",
                                 kUsage, Run};

std::string ConfigSummary(const RunConfig& c, int world_size) {
  const EngineConfig& e = c.engine;
  const ParallelConfig& p = e.parallel();
  std::string out;
  absl::StrAppend(&out, "valid config",
                  world_size > 0 ? absl::StrCat(" for ", world_size, " ranks") : std::string(" (world size not checked)"),
                  "\n");
  absl::StrAppend(&out, "kind       ", c.kind, " (", c.message_name, ")\n");
  absl::StrAppend(&out, "model      ", c.model_summary, "\n");
  // What each rank's CPU kernels would run on here: the library, the core type
  // it picks on this machine, and engine.device.threads_per_rank or the default.
  const kernels::CpuBlasInfo blas = kernels::DescribeCpuBlas();
  const int threads = kernels::CpuThreadsOrDefault(e.device().threads_per_rank());
  absl::StrAppendFormat(&out, "cpu        %s, %s kernels, %d thread%s per rank, %s loops\n", blas.library, blas.core,
                        threads, threads == 1 ? "" : "s", blas.vector_isa);
  absl::StrAppendFormat(&out, "parallel   dp=%d tp=%d pp=%d\n", p.dp(), p.tp(), p.pp());
  if (p.pp() > 1) {
    absl::StrAppend(&out, "pipeline   ", ParallelConfig::PipelineSchedule_Name(p.pipeline_schedule()), ", ",
                    p.virtual_stages(), " chunk(s) per stage, partition ",
                    p.pp_partition_size() > 0 ? absl::StrJoin(p.pp_partition(), ",") : std::string("by cost"),
                    " (`zeroshard schedule` prints it)\n");
  }
  absl::StrAppendFormat(&out, "batch      %d %s/step = dp %d x accumulation %d x micro-batch %d%s\n", c.global_batch,
                        c.rows_name, p.dp(), e.gradient_accumulation_steps(), MicroBatchSize(e, c.global_batch),
                        c.batch_note);
  absl::StrAppendFormat(&out, "zero       stage %d, prefetch %d, persistence_threshold %d, bucket_bytes %d\n",
                        e.zero().stage(), e.zero().prefetch(), e.zero().persistence_threshold(),
                        e.zero().bucket_bytes());
  absl::StrAppendFormat(&out, "precision  compute %s, master %s, reduce %s\n",
                        DTypeProto_Name(e.precision().compute_dtype()), DTypeProto_Name(e.precision().master_dtype()),
                        DTypeProto_Name(e.precision().reduce_dtype()));
  absl::StrAppendFormat(&out, "optimizer  %s lr %g weight_decay %g grad_clip %g, schedule %s\n",
                        OptimizerConfig::Type_Name(e.optimizer().type()), e.optimizer().lr(),
                        e.optimizer().weight_decay(), e.optimizer().grad_clip(),
                        LrScheduleConfig::Type_Name(e.lr_schedule().type()));
  absl::StrAppend(&out, "training   ", c.training_summary, "\n");
  absl::StrAppend(&out, "--- normalized config ---\n", c.normalized_text);
  return out;
}

absl::Status MemoryPlanReport(const RunConfig& c, int world_size, int64_t limit_bytes, std::string* report) {
  absl::StatusOr<EngineOptions> options = EngineOptionsFromConfig(c.engine);
  if (!options.ok()) return options.status();
  absl::StatusOr<std::unique_ptr<Model>> model = c.build_model();
  if (!model.ok()) return model.status();
  const ParallelConfig& p = c.engine.parallel();
  const int dp = p.dp(), tp = p.tp(), pp = p.pp();
  const int shard = options->sharding.shard_group_size > 0 ? options->sharding.shard_group_size : dp;
  const int world = world_size > 0 ? world_size : dp * tp * pp;
  MemoryPlanInputs in;
  in.options = *options;
  in.model = model->get();
  in.dp_size = shard;
  in.tp_size = tp;
  in.micro_batch = MicroBatchSize(c.engine, c.global_batch);
  in.sequence_length = c.sequence_length;
  in.cpu_threads = kernels::CpuThreadsOrDefault(c.engine.device().threads_per_rank());
  // Ranks of one pipeline stage hold equal shards (layouts pad every shard
  // to the same size): one plan per stage, its ranks listed.
  absl::Status first_refusal;
  for (int stage = 0; stage < pp; ++stage) {
    EngineOptions stage_options = *options;
    absl::StatusOr<StepPlan> plan = PlanStep(**model, stage_options, shard, stage);
    if (!plan.ok()) return plan.status();
    std::vector<int> ranks;
    // World rank = tp_rank + tp · (dp_rank + dp · pp_rank) (comm/process_grid.h).
    for (int r = 0; r < world; ++r) {
      if (r / (tp * dp) == stage) ranks.push_back(r);
    }
    in.plan = &*plan;
    in.pp_stage = stage;
    in.rank = ranks.empty() ? 0 : ranks.front();
    in.options = stage_options;
    absl::StatusOr<MemoryPlan> m =
        PlanMemoryChoosingBufferCount(in, limit_bytes, shard, stage, &stage_options, &*plan);
    if (!m.ok()) return m.status();
    absl::StrAppend(report, ranks.size() == 1 ? "rank " : "ranks ",
                    ranks.size() > 2 ? absl::StrCat(ranks.front(), "-", ranks.back()) : absl::StrJoin(ranks, ", "),
                    pp > 1 ? absl::StrCat(" (pipeline stage ", stage, ")") : std::string(), ":\n",
                    FormatMemoryPlan(*m, limit_bytes));
    if (first_refusal.ok()) first_refusal = CheckMemoryPlan(*m, limit_bytes);
  }
  return first_refusal;
}

}  // namespace zeroshard::cli
