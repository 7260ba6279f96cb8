#include "examples/classifier/classifier_trainer.h"

#include <mpi.h>

#include <chrono>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_env.h"
#include "comm/process_grid.h"
#include "engine/engine_runtime.h"
#include "core/status_macros.h"
#include "core/timeline.h"
#include "engine/engine.h"
#include "models/classifier/classifier_config.h"
#include "models/classifier/classifier_data.h"
#include "models/classifier/classifier_model.h"
#include "kernels/context.h"

namespace zeroshard {
namespace {

absl::StatusOr<double> Metric(const std::vector<NamedMetric>& metrics, absl::string_view name) {
  for (const NamedMetric& m : metrics) {
    if (m.name == name) return m.value;
  }
  return absl::InternalError(absl::StrCat("the model reports no metric '", name, "'"));
}

int64_t TrainableParams(const Model& model) {
  int64_t n = 0;
  for (const auto& unit : model.units) {
    for (const ParamSpec& p : unit->params()) n += p.trainable ? p.numel() : 0;
  }
  return n;
}

std::string Widths(const ClassifierModelConfig& m) { return absl::StrCat("[", absl::StrJoin(m.hidden(), ", "), "]"); }

}  // namespace

absl::Status RunClassifierTraining(const ClassifierFlags& flags, std::ostream& out) {
  RETURN_IF_ERROR(EnsureMpiInitialized());
  int world_size = 1, world_rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  const bool leader = world_rank == 0;

  ASSIGN_OR_RETURN(const ClassifierTrainConfig config,
                   LoadClassifierConfig(flags.config_path, flags.overrides, world_size));
  // The schedule follows the config's planned length; --steps only says
  // where this job stops.
  const int64_t total_steps = flags.steps >= 0 ? flags.steps : config.steps();
  const EngineConfig engine_config = ClassifierEngineConfig(config);
  CommOptions comm_options;
  comm_options.debug_checks = engine_config.comm().debug_checks();
  comm_options.timeout = absl::Seconds(engine_config.comm().timeout_s());
  const ParallelConfig& par = engine_config.parallel();
  ASSIGN_OR_RETURN(EngineRuntime runtime, CreateEngineRuntime(engine_config, comm_options));
  ProcessGrid& grid = *runtime.grid;

  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, BuildClassifier(config.model()));
  const int64_t num_params = model->num_params();
  const int64_t trainable = TrainableParams(*model);
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(engine_config, &grid, std::move(model)));

  const LabeledExamples train = GenerateBlobs(ClassifierBlobOptions(config, BlobSplit::kTrain), BlobSplit::kTrain);
  const LabeledExamples held_out =
      GenerateBlobs(ClassifierBlobOptions(config, BlobSplit::kHeldOut), BlobSplit::kHeldOut);
  BatchPlan plan;
  plan.batch_size = config.data().batch_size();
  plan.dp = par.dp();
  plan.accumulation_steps = engine_config.gradient_accumulation_steps();
  RankBatches batches(plan, config.model().input_dim(), grid.dp_rank());

  const ClassifierModelConfig& m = config.model();
  if (leader) {
    out << absl::StrFormat(
        "zeroshard: classifier input_dim=%d projection_dim=%d%s hidden=%s num_classes=%d: %d params (%d trainable) | "
        "world %d = dp %d | ZeRO stage %d | %d examples per step = dp %d x accumulation %d x %d | %d steps\n",
        m.input_dim(), m.projection_dim(), m.freeze_input_layer() ? " (frozen)" : "", Widths(m), m.num_classes(),
        num_params, trainable, world_size, par.dp(), engine_config.zero().stage(), plan.batch_size, plan.dp,
        plan.accumulation_steps, plan.micro_batch_size(), total_steps);
    out << "zeroshard: cpu kernels " << runtime.cpu_kernels << "\n";
    if (!runtime.cpu_kernels_warning.empty()) out << "zeroshard: warning: " << runtime.cpu_kernels_warning << "\n";
  }

  const int log_interval = engine_config.logging().interval();
  std::optional<float> last_loss;
  bool trace_written = false;
  for (int64_t step = 0; step < total_steps; ++step) {
    batches.Fill(train, step);
    const auto t0 = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(const StepResult r, engine->TrainStep(batches.batches()));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const int64_t done = step + 1;
    if (leader && (done == 1 || done % log_interval == 0 || done == total_steps)) {
      ASSIGN_OR_RETURN(const double accuracy, Metric(r.metrics, "accuracy"));
      out << absl::StrFormat("step %d/%d | loss %.4f | train accuracy %.4f | lr %.2e | norm %.3f | %.1f ms%s", done,
                             total_steps, r.loss, accuracy, r.lr, r.grad_norm, ms, r.skipped ? " | SKIPPED" : "")
          << std::endl;
    }
    last_loss = r.loss;
    if (engine->trace_due()) {
      RETURN_IF_ERROR(engine->WriteTrace().status());
      trace_written = true;
    }
  }
  if (engine->timeline() != nullptr && !trace_written) RETURN_IF_ERROR(engine->WriteTrace().status());

  const std::unique_ptr<ExampleBatch> eval = EvalShard(held_out, par.dp(), grid.dp_rank());
  ASSIGN_OR_RETURN(const EvalResult e, engine->Evaluate(eval->batch()));
  ASSIGN_OR_RETURN(const double accuracy, Metric(e.metrics, "accuracy"));
  if (leader) {
    out << absl::StrFormat("held-out loss %.4f over %d examples\n", e.loss, held_out.size());
    out << absl::StrFormat("final loss %.4f\n", last_loss.has_value() ? *last_loss : e.loss);
    out << absl::StrFormat("accuracy %.4f", accuracy) << std::endl;
  }
  return absl::OkStatus();
}

}  // namespace zeroshard
