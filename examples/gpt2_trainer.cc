#include "examples/gpt2_trainer.h"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "checkpoint/async_checkpoint.h"
#include "checkpoint/engine_checkpoint.h"
#include "comm/host_topology.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_env.h"
#include "comm/process_grid.h"
#include "core/status_macros.h"
#include "core/timeline.h"
#include "data/batch_plan.h"
#include "data/token_file.h"
#include "engine/engine.h"
#include "engine/observer.h"
#include "engine/engine_runtime.h"
#include "engine/memory_plan.h"
#include "engine/metrics_writer.h"
#include "engine/shard_group.h"
#include "engine/straggler.h"
#include "examples/preemption.h"
#include "kernels/context.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_model_config.h"
#include "models/gpt2/gpt2_registration.h"
#include "models/gpt2/train_config.h"
#include "nn/tensor_checks.h"

namespace zeroshard {
namespace {

// Rank-local micro-batches of one step, as the engine takes them.
class StepBatches {
 public:
  StepBatches(int accumulation, int64_t rows, int64_t seq_len)
      : rows_(rows), seq_len_(seq_len), inputs_(accumulation), targets_(accumulation), views_(accumulation) {
    for (int m = 0; m < accumulation; ++m) {
      inputs_[m].resize(rows * seq_len);
      targets_[m].resize(rows * seq_len);
      views_[m] = Gpt2Batch(View(inputs_[m]), View(targets_[m]));
    }
  }

  absl::Status Fill(BatchSource& source, int64_t step, int dp_rank) {
    for (size_t m = 0; m < inputs_.size(); ++m) {
      RETURN_IF_ERROR(source.GetInputsTargets(step, static_cast<int64_t>(m), dp_rank, absl::MakeSpan(inputs_[m]),
                                              absl::MakeSpan(targets_[m])));
    }
    return absl::OkStatus();
  }

  absl::Span<const Batch> batches() const { return views_; }

 private:
  TensorView View(std::vector<int32_t>& v) {
    TensorView t;
    t.data = v.data();
    t.dtype = DType::kI32;
    t.shape = {rows_, seq_len_};
    return t;
  }

  int64_t rows_, seq_len_;
  std::vector<std::vector<int32_t>> inputs_, targets_;
  std::vector<Batch> views_;
};

TokenFileFormat FormatOf(const DataConfig& data) {
  return data.format() == DataConfig::RAW_U16 ? TokenFileFormat::kRawU16 : TokenFileFormat::kLlmc;
}

struct DataSplit {
  TokenDataset dataset;
  std::optional<BatchSource> source;
};

absl::StatusOr<std::unique_ptr<DataSplit>> OpenSplit(const std::string& path, const TrainConfig& config) {
  auto split = std::make_unique<DataSplit>();
  ASSIGN_OR_RETURN(split->dataset, TokenDataset::Open(path, config.model().vocab_size(), FormatOf(config.data())));
  BatchPlan plan;
  plan.batch_size = config.data().batch_size();
  plan.dp = config.engine().parallel().dp();
  plan.accumulation_steps = config.engine().gradient_accumulation_steps();
  plan.seq_len = config.model().seq_len();
  plan.shuffle_seed = config.data().shuffle_seed();
  ASSIGN_OR_RETURN(BatchSource source, BatchSource::Create(&split->dataset, plan));
  split->source.emplace(std::move(source));
  return split;
}

// Validation loss over data.eval_batches global batches (collective): the
// mean over every target token evaluated.
absl::StatusOr<float> EvaluateValidation(Engine& engine, DataSplit& val, const TrainConfig& config, int dp_rank) {
  const int accumulation = config.engine().gradient_accumulation_steps();
  StepBatches batches(accumulation, val.source->plan().micro_batch_size(), config.model().seq_len());
  double sum = 0, weight = 0;
  for (int b = 0; b < config.data().eval_batches(); ++b) {
    RETURN_IF_ERROR(batches.Fill(*val.source, b, dp_rank));
    for (const Batch& micro : batches.batches()) {
      ASSIGN_OR_RETURN(EvalResult r, engine.Evaluate(micro));
      sum += static_cast<double>(r.loss) * r.loss_weight;
      weight += r.loss_weight;
    }
  }
  return static_cast<float>(sum / weight);
}

std::string Bytes(int64_t b) {
  if (b >= (int64_t{1} << 30)) return absl::StrFormat("%.2fG", b / double(int64_t{1} << 30));
  if (b >= (1 << 20)) return absl::StrFormat("%.1fM", b / double(1 << 20));
  if (b >= (1 << 10)) return absl::StrFormat("%.1fK", b / double(1 << 10));
  return absl::StrCat(b);
}

// Peak bytes per memory category, maximum over all ranks (collective).
absl::StatusOr<std::array<int64_t, kNumMemoryCategories>> MaxPeaks(Communicator& world, const MemoryTracker& mem) {
  // KiB as f32: exact below 16 GiB per category, and MAX needs no i64 type.
  std::array<float, kNumMemoryCategories> kib{};
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    kib[c] = static_cast<float>(mem.Usage(static_cast<MemoryCategory>(c)).peak / 1024);
  }
  RETURN_IF_ERROR(world.AllReduce(kib.data(), kNumMemoryCategories, DType::kF32, ReduceOp::kMax)->Wait());
  std::array<int64_t, kNumMemoryCategories> out{};
  for (int c = 0; c < kNumMemoryCategories; ++c) out[c] = static_cast<int64_t>(kib[c]) * 1024;
  return out;
}

// Writes the engine's trace (collective) and says where it went.
absl::Status WriteTrace(Engine& engine, const std::string& path, int ranks, bool leader, std::ostream& out) {
  ASSIGN_OR_RETURN(TraceFileInfo info, engine.WriteTrace());
  if (leader) {
    out << absl::StrFormat("zeroshard: wrote trace %s (%d events from %d ranks, %.1f KiB; open it in ui.perfetto.dev)\n",
                           path, info.events, ranks, info.bytes / 1024.0);
  }
  return absl::OkStatus();
}

std::string ProgressLine(int64_t step, const StepResult& r, int64_t total_steps, std::optional<float> val_loss, double step_ms,
                         double tokens_per_s, const std::array<int64_t, kNumMemoryCategories>& peaks) {
  std::string line = absl::StrFormat("step %5d/%d | loss %.4f", step, total_steps, r.loss);
  if (val_loss.has_value()) absl::StrAppendFormat(&line, " | val %.4f", *val_loss);
  absl::StrAppendFormat(&line, " | lr %.2e | norm %.3f | scale %g%s | %.0f tok/s | %.0f ms | peak/rank", r.lr,
                        r.grad_norm, r.loss_scale, r.skipped ? absl::StrCat(" SKIPPED (", r.skipped_steps, " so far)") : "",
                        tokens_per_s, step_ms);
  static constexpr const char* kShort[] = {"params", "master", "grads", "optim", "act", "comm", "work", "staging"};
  for (int c = 0; c < kNumMemoryCategories; ++c) absl::StrAppend(&line, " ", kShort[c], " ", Bytes(peaks[c]));
  return line;
}

// "ONE_F_ONE_B; stage 0: embed..h.0; stage 1: h.1..head" with pipeline
// stages (chunks of a stage joined by ", "), empty without.
std::string DescribePipeline(const StepPlan& plan, const EngineConfig& config) {
  if (plan.chunk_begin.empty()) return "";
  std::vector<std::string> stages(plan.stages);
  const int chunks = static_cast<int>(plan.chunk_begin.size()) - 1;
  for (int c = 0; c < chunks; ++c) {
    const std::string first = plan.layouts[plan.chunk_begin[c]].unit_name();
    const std::string last = plan.layouts[plan.chunk_begin[c + 1] - 1].unit_name();
    std::string& s = stages[c % plan.stages];
    absl::StrAppend(&s, s.empty() ? "" : ", ", first, first == last ? "" : absl::StrCat("..", last));
  }
  std::string out = ParallelConfig::PipelineSchedule_Name(config.parallel().pipeline_schedule());
  for (int s = 0; s < plan.stages; ++s) absl::StrAppend(&out, "; stage ", s, ": ", stages[s]);
  return out;
}

// --testing_slow_rank: this rank sleeps before the first FORWARD of every
// training step it attempts, inside the step's compute time, so the
// straggler report has a rank to name.
class SlowRank : public EngineObserver {
 public:
  explicit SlowRank(double ms) : ms_(ms) {}
  bool active() const { return ms_ > 0; }
  void OnActionStart(const ActionEvent& action) override {
    if (action.action->kind != ActionKind::kForward || action.attempt == slowed_) return;
    slowed_ = action.attempt;
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms_));
  }

 private:
  double ms_;
  int64_t slowed_ = -1;
};

}  // namespace

absl::Status RunGpt2Training(const TrainerFlags& flags, std::ostream& out, TrainerOutcome* outcome) {
  RETURN_IF_ERROR(EnsureMpiInitialized());
  int world_size = 1, world_rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  const bool leader = world_rank == 0;

  ASSIGN_OR_RETURN(TrainConfig config, LoadTrainConfig(flags.config_path, flags.overrides, world_size));
  // The schedule follows the config's planned length; --steps only says where
  // this job stops, so a run split into several jobs trains identically.
  const int64_t planned_steps = config.steps();
  const int64_t total_steps = flags.steps >= 0 ? flags.steps : planned_steps;
  // Checkpoints are due every interval and at this job's last step; the
  // manifest records the config as given.
  const CheckpointRunConfig run_record = Gpt2RunRecord(config);
  if (flags.resume && config.engine().checkpoint().dir().empty()) {
    return absl::InvalidArgumentError("--resume needs engine.checkpoint.dir in the config (or --set it)");
  }
  if (flags.resume && !flags.init_from.empty()) {
    return absl::InvalidArgumentError("--resume and --init_from exclude each other");
  }
  EngineConfig engine_config = config.engine();
  if (engine_config.lr_schedule().type() != LrScheduleConfig::CONSTANT && engine_config.lr_schedule().decay_steps() == 0) {
    engine_config.mutable_lr_schedule()->set_decay_steps(static_cast<int32_t>(std::max<int64_t>(
        planned_steps, engine_config.lr_schedule().warmup_steps() + 1)));
  }

  // Which host each rank runs on; PER_HOST becomes the shard group size of
  // one host before the grid is made, so everything below sees one size.
  ASSIGN_OR_RETURN(const HostTopology hosts, DetectHostTopology());
  RETURN_IF_ERROR(ResolveShardGroup(hosts, &engine_config));

  CommOptions comm_options;
  comm_options.debug_checks = engine_config.comm().debug_checks();
  comm_options.timeout = absl::Seconds(engine_config.comm().timeout_s());
  // The rank's device and the grid whose data communicators move its buffers.
  ASSIGN_OR_RETURN(EngineRuntime runtime, CreateEngineRuntime(engine_config, comm_options));
  ProcessGrid& grid = *runtime.grid;
  Communicator* world_ptr = &grid.world_control();
  const ParallelConfig& par = engine_config.parallel();

  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, BuildGpt2(Gpt2ConfigFromTrainConfig(config)));
  const int64_t num_params = model->num_logical_params();  // vocabulary padding not counted
  // This rank's compute time for the straggler report, and the testing
  // straggler; both outlive the engine.
  ComputeTimeObserver compute_time;
  SlowRank slow_rank(flags.slow_rank == world_rank ? flags.slow_rank_ms : 0);
  std::vector<EngineObserver*> observers = {&compute_time};
  if (slow_rank.active()) observers.push_back(&slow_rank);
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                   Engine::Create(engine_config, &grid, std::move(model), observers));
  const std::string pipeline = DescribePipeline(engine->plan(), engine_config);

  ASSIGN_OR_RETURN(std::unique_ptr<DataSplit> train, OpenSplit(config.data().train_path(), config));
  std::unique_ptr<DataSplit> val;
  if (!config.data().val_path().empty()) {
    ASSIGN_OR_RETURN(val, OpenSplit(config.data().val_path(), config));
  }
  const int dp_rank = grid.dp_rank();

  int64_t step = 0;  // optimizer iterations done (skipped ones included): the data position
  if (!flags.init_from.empty()) {
    if (absl::EndsWith(flags.init_from, ".safetensors")) {
      RETURN_IF_ERROR(ImportSafetensors(*engine, flags.init_from));
    } else {
      LoadOptions weights_only;
      weights_only.weights_only = true;
      RETURN_IF_ERROR(LoadCheckpoint(*engine, flags.init_from, weights_only).status());
    }
    if (leader) out << "zeroshard: initialised weights from " << flags.init_from << "\n";
  }
  if (flags.resume) {
    ASSIGN_OR_RETURN(LoadedCheckpoint ck, LoadCheckpoint(*engine, config.engine().checkpoint().dir()));
    const int64_t expected = ck.step * config.data().batch_size();
    if (ck.data.sequences_consumed != expected || ck.data.shuffle_seed != config.data().shuffle_seed()) {
      return absl::FailedPreconditionError(absl::StrCat(
          ck.dir, ": data position ", ck.data.sequences_consumed, " sequences (shuffle seed ", ck.data.shuffle_seed,
          ") does not match step ", ck.step, " x data.batch_size ", config.data().batch_size(), " = ", expected,
          " (shuffle seed ", config.data().shuffle_seed(), "); resume with the saving run's batch size and seed"));
    }
    step = ck.step;
    if (!ck.fallback_warning.empty()) out << "zeroshard: warning: " << ck.fallback_warning << "\n";
    if (leader) {
      out << "zeroshard: resumed from " << ck.dir << " at step " << step
          << (ck.saved_dp != par.dp() || ck.saved_tp != par.tp() || ck.saved_pp != par.pp()
                  ? absl::StrCat(" (resharded from dp ", ck.saved_dp, " tp ", ck.saved_tp, " pp ", ck.saved_pp, ")")
                  : "")
          << "\n";
    }
  }

  const std::string& trace_path = engine_config.logging().trace_path();
  if (flags.eval_only) {
    if (val == nullptr) return absl::InvalidArgumentError("--eval_only needs data.val_path in the config");
    ASSIGN_OR_RETURN(float loss, EvaluateValidation(*engine, *val, config, dp_rank));
    if (leader) out << absl::StrFormat("val_loss %.6f\n", loss);
    if (engine->timeline() != nullptr) RETURN_IF_ERROR(WriteTrace(*engine, trace_path, world_size, leader, out));
    return absl::OkStatus();
  }

  std::unique_ptr<MetricsWriter> metrics;
  if (leader && !engine_config.logging().metrics_path().empty()) {
    MetricsHeader h;
    h.num_params = num_params;
    h.world_size = world_size;
    h.hosts = hosts.hosts();
    h.ranks_per_host = hosts.ranks_per_host();
    h.dp = par.dp();
    h.tp = par.tp();
    h.sequence_parallel = par.sequence_parallel();
    h.pp = par.pp();
    h.zero_stage = engine_config.zero().stage();
    h.compute_dtype = absl::AsciiStrToLower(DTypeProto_Name(engine_config.precision().compute_dtype()));
    h.tokens_per_step = int64_t{config.data().batch_size()} * config.model().seq_len();
    h.gradient_accumulation_steps = engine_config.gradient_accumulation_steps();
    h.config_path = flags.config_path;
    h.pipeline = pipeline;
    h.cpu_kernels = kernels::DescribeCpuBlas();
    const ZeroConfig& zero = engine_config.zero();
    if (zero.shard_group_size() > 0 && zero.shard_group_size() < par.dp()) h.shard_group_size = zero.shard_group_size();
    if (zero.weight_quantization() == ZeroConfig::INT8) h.quantized.push_back("weights");
    if (zero.gradient_quantization() == ZeroConfig::INT8) h.quantized.push_back("gradients");
    if (zero.replica_quantization() == ZeroConfig::INT8) h.quantized.push_back("replicas");
    const TierBytes tiers = engine->memory_plan().Totals();
    h.memory_plan = MetricsHeader::MemoryPlanSummary{tiers.device, tiers.host, tiers.nvme,
                                                     engine->memory_plan().resident_bytes(), engine->memory_limit()};
    ASSIGN_OR_RETURN(metrics, MetricsWriter::Open(engine_config.logging().metrics_path(), h, /*append=*/flags.resume));
  }
  if (leader) {
    out << absl::StrFormat(
        "zeroshard: GPT-2 %d params | world %d = dp %d x tp %d%s x pp %d | %s | ZeRO stage %d | %d sequences x %d "
        "tokens per step | %d steps\n",
        num_params, world_size, par.dp(), par.tp(), par.sequence_parallel() ? " (sequence parallel)" : "", par.pp(),
        hosts.Describe(), engine_config.zero().stage(),
        config.data().batch_size(), config.model().seq_len(), total_steps);
    if (!pipeline.empty()) out << "zeroshard: pipeline " << pipeline << "\n";
    if (runtime.device != Device::kCpu) out << "zeroshard: device " << runtime.description << "\n";
    out << "zeroshard: cpu kernels " << runtime.cpu_kernels << "\n";
    if (!runtime.cpu_kernels_warning.empty()) out << "zeroshard: warning: " << runtime.cpu_kernels_warning << "\n";
    if (PoisonOutputs()) {
      out << "zeroshard: debug: unzeroed outputs are filled with NaN bytes (ZEROSHARD_POISON_OUTPUTS=1)\n";
    }
    const std::string tp_warning = TpSpansHostsWarning(hosts, par.tp());
    if (!tp_warning.empty()) out << "zeroshard: warning: " << tp_warning << "\n";
    const ZeroConfig& zero = engine_config.zero();
    const int shard_group = zero.shard_group_size() > 0 ? zero.shard_group_size() : par.dp();
    std::string line;
    if (shard_group < par.dp()) {
      line = absl::StrFormat(" | hybrid sharding: groups of %d dp ranks, %d replicas", shard_group,
                             par.dp() / shard_group);
    }
    if (zero.weight_quantization() == ZeroConfig::INT8) absl::StrAppend(&line, " | int8 weight gathers");
    if (zero.gradient_quantization() == ZeroConfig::INT8) {
      absl::StrAppend(&line, " | int8 gradient reductions", zero.error_feedback() ? " with error feedback" : "");
    }
    if (zero.replica_quantization() == ZeroConfig::INT8) absl::StrAppend(&line, " | int8 replica reductions");
    if (zero.weight_quantization() == ZeroConfig::INT8 || zero.gradient_quantization() == ZeroConfig::INT8 ||
        zero.replica_quantization() == ZeroConfig::INT8) {
      absl::StrAppend(&line, " (blocks of ", zero.quantization_block(), ")");
    }
    if (!line.empty()) out << "zeroshard: data parallelism" << line << "\n";
  }

  StepBatches batches(engine_config.gradient_accumulation_steps(), train->source->plan().micro_batch_size(),
                      config.model().seq_len());
  const int log_interval = engine_config.logging().interval();
  std::optional<float> last_loss;
  SaveOptions save_options = SaveOptionsFromConfig(config.engine());
  if (flags.fail_async_write_rank == world_rank) {
    const int64_t fail_step = flags.fail_async_write_step;
    save_options.async_write_fault = [fail_step](int64_t step) {
      return step == fail_step ? absl::DataLossError("failed by --testing_fail_async_write") : absl::OkStatus();
    };
  }
  const std::string& checkpoint_dir = config.engine().checkpoint().dir();
  // engine.checkpoint.async_save: saves are snapshotted at the due step and
  // committed at a later boundary (docs/resilience.md, "Asynchronous saves").
  std::optional<AsyncCheckpointer> async;
  if (config.engine().checkpoint().async_save()) async.emplace(save_options);
  const auto finish_async = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(const int64_t committed, async->Finish(*engine));
    if (leader) out << "zeroshard: saved " << checkpoint_dir << "/step_" << committed << std::endl;
    return absl::OkStatus();
  };
  // With checkpoints on, SIGTERM/SIGUSR1 on any rank stop the job at the
  // next step boundary after a checkpoint (docs/resilience.md).
  std::optional<PreemptionSignals> preemption;
  if (!config.engine().checkpoint().dir().empty()) preemption.emplace();
  bool trace_written = false;
  const std::map<std::string, std::vector<int>> group_ranks = engine->comm_group_world_ranks();
  while (step < total_steps) {
    {
      TraceScope span(engine->timeline(), "data", "load batch");
      RETURN_IF_ERROR(batches.Fill(*train->source, step, dp_rank));
    }
    const std::map<std::string, CommStats> before = engine->comm_stats_by_group();
    const auto t0 = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(StepResult r, engine->TrainStep(batches.batches()));
    const double step_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    int64_t comm_bytes = 0;  // every data group's (dp, tp, pp, embed)
    std::map<std::string, int64_t> comm_bytes_by_group;
    for (const auto& [group, stats] : engine->comm_stats_by_group()) {
      comm_bytes_by_group[group] = (stats - before.at(group)).Total().bytes_sent;
      comm_bytes += comm_bytes_by_group[group];
    }
    const int64_t inter_host_bytes = InterHostBytesSent(hosts, comm_bytes_by_group, group_ranks);
    ++step;

    std::optional<float> val_loss;
    const bool last = step >= total_steps;
    if (val != nullptr && config.eval_interval() > 0 && (step % config.eval_interval() == 0 || last)) {
      TraceScope span(engine->timeline(), "eval", "validation");
      ASSIGN_OR_RETURN(float v, EvaluateValidation(*engine, *val, config, dp_rank));
      val_loss = v;
    }
    const double tokens_per_s = static_cast<double>(r.rows) * config.model().seq_len() / (step_ms / 1000.0);
    // Every logging step the ranks share their compute time since the last
    // one (one small all-gather on the world) and name the slowest.
    const bool logging = step % log_interval == 0 || last || step == 1;
    std::optional<StragglerReport> straggler;
    if (logging) {
      ASSIGN_OR_RETURN(straggler, ShareComputeTimes(*world_ptr, compute_time.TakeMs()));
    }
    if (metrics != nullptr) {
      StepMetrics m;
      if (straggler.has_value()) {
        m.straggler = StepMetrics::Straggler{straggler->slowest_rank, straggler->slowest_ms, straggler->median_ms};
      }
      m.step = step;
      m.loss = r.loss;
      m.val_loss = val_loss;
      m.lr = r.lr;
      m.grad_norm = r.grad_norm;
      m.loss_scale = static_cast<float>(r.loss_scale);
      m.skipped = r.skipped;
      m.tokens_per_s = tokens_per_s;
      m.step_ms = step_ms;
      m.comm_bytes = comm_bytes;
      m.comm_bytes_by_group = comm_bytes_by_group;
      m.inter_host_bytes = inter_host_bytes;
      m.io = {r.io.read_bytes, r.io.write_bytes, r.io.busy_seconds * 1e3};
      if (async.has_value()) m.checkpoint_snapshot = MemoryUsage{async->snapshot_bytes(), async->peak_snapshot_bytes()};
      if (logging) m.memory_plan = StepMetrics::MemoryPlanUse{engine->memory_plan().resident_bytes(), MeasuredPeakRss()};
      RETURN_IF_ERROR(metrics->Write(m, engine->memory()));
    }
    if (logging) {
      ASSIGN_OR_RETURN(auto peaks, MaxPeaks(*world_ptr, engine->memory()));
      if (leader) {
        out << ProgressLine(step, r, total_steps, val_loss, step_ms, tokens_per_s, peaks);
        // Rank 0's share of the step's traffic between hosts.
        if (hosts.hosts() > 1) out << " | inter-host " << Bytes(inter_host_bytes);
        if (straggler->Notable()) {
          out << absl::StrFormat(" | slowest rank %d: %.0f ms compute vs median %.0f", straggler->slowest_rank,
                                 straggler->slowest_ms, straggler->median_ms);
        }
        out << std::endl;
      }
    }
    bool preempted = false;
    if (preemption.has_value() && !last) {
      // One all-reduce: preemption, and whether every rank's write of an
      // asynchronous save in flight has finished; if so it commits now.
      const bool writing = async.has_value() && async->in_flight() && !async->written();
      ASSIGN_OR_RETURN(const PreemptionSignals::Boundary agreed, preemption->AgreeAtBoundary(*world_ptr, writing));
      preempted = agreed.preempted;
      if (async.has_value() && async->in_flight() && agreed.writes_finished) {
        TraceScope span(engine->timeline(), "checkpoint", "commit async checkpoint");
        RETURN_IF_ERROR(finish_async());
      }
    }
    std::optional<PreemptDeadline> deadline;
    SaveOptions step_save_options = save_options;
    if (preempted) {
      deadline.emplace(config.engine().checkpoint().preempt_deadline_s(), PreemptionSignals::DeadlineStartNs(),
                       absl::StrCat("the preemption checkpoint of step ", step));
      // Rank 0 judges the deadline once more right before the commit's rename.
      step_save_options.fault_hook = [&deadline](absl::string_view phase) {
        if (phase == "before_commit") deadline->ExitIfPassed();
      };
    }
    if (preempted || CheckpointDue(config.engine(), total_steps, step)) {
      const DataPosition data{step * config.data().batch_size(), config.data().shuffle_seed()};
      // At most one asynchronous save in flight: the previous one commits
      // first (waiting for its writes). A preemption's save is synchronous,
      // inside its deadline; so is nothing else.
      if (async.has_value() && async->in_flight()) {
        TraceScope span(engine->timeline(), "checkpoint", "finish async checkpoint");
        RETURN_IF_ERROR(finish_async());
      }
      if (async.has_value() && !preempted) {
        TraceScope span(engine->timeline(), "checkpoint", "snapshot checkpoint");
        RETURN_IF_ERROR(async->Begin(*engine, checkpoint_dir, step, run_record, data));
        // The job's last save commits before it ends.
        if (last) RETURN_IF_ERROR(finish_async());
      } else {
        TraceScope span(engine->timeline(), "checkpoint", "save checkpoint");
        RETURN_IF_ERROR(SaveCheckpoint(*engine, checkpoint_dir, step, run_record, data, step_save_options));
        if (leader) out << "zeroshard: saved " << checkpoint_dir << "/step_" << step << std::endl;
      }
    }
    if (preempted) {
      deadline->Disarm();
      if (leader) {
        out << "zeroshard: preempted at step " << step << " of " << total_steps
            << "; resume with --resume (exit " << kExitPreempted << ")" << std::endl;
      }
      if (outcome != nullptr) outcome->preempted = true;
      break;
    }
    last_loss = r.loss;
    if (engine->trace_due()) {
      RETURN_IF_ERROR(WriteTrace(*engine, trace_path, world_size, leader, out));
      trace_written = true;
    }
  }
  if (async.has_value() && async->in_flight()) RETURN_IF_ERROR(finish_async());
  if (engine->timeline() != nullptr && !trace_written) RETURN_IF_ERROR(WriteTrace(*engine, trace_path, world_size, leader, out));
  if (leader && last_loss.has_value()) out << absl::StrFormat("done: step %d, final train loss %.4f\n", step, *last_loss);
  return absl::OkStatus();
}

}  // namespace zeroshard
