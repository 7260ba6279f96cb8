// Activation checkpointing benchmark: peak activation bytes and step time of
// one rank with policy none / every unit / every 2nd unit / selective
// (docs/activation_checkpointing.md), on a deeper GPT-2
// (default 12 layers, C = 384, 6 heads, V = 50257, T = 256, 1 sequence).
// Runs under `mpirun -np 1` (bench/activation_checkpointing/run.sh), stage 0,
// f32 (or --compute_dtype bf16). The policies are interleaved step by step
// after one warm-up each; the table reports the median of --repeats steps.
// Peak activation bytes are the tracker's kActivations peak during one step
// (saved tensors, unit outputs, kept inputs, gradients flowing backward); a
// second table sets it beside the memory plan's estimate (engine/memory_plan.h)
// and the tracker's workspace peak (where selective checkpointing's rebuilt
// tensors live during a block's backward).
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_env.h"
#include "comm/process_grid.h"
#include "engine/engine.h"
#include "engine/memory_plan.h"
#include "engine/testing/global_batch.h"
#include "kernels/context.h"
#include "models/gpt2/gpt2.h"

ABSL_FLAG(int, layers, 12, "transformer blocks");
ABSL_FLAG(int, embd, 384, "width C");
ABSL_FLAG(int, heads, 6, "attention heads");
ABSL_FLAG(int, vocab, 50257, "vocabulary");
ABSL_FLAG(int, seq, 256, "tokens per sequence");
ABSL_FLAG(int, batch, 1, "sequences per step");
ABSL_FLAG(int, repeats, 5, "timed steps per policy (after one warm-up)");
ABSL_FLAG(std::string, compute_dtype, "f32", "f32, bf16 or f16");

namespace zeroshard {
namespace {

void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, std::string(s.message()).c_str());
    std::exit(1);
  }
}

struct Policy {
  const char* name;
  ActivationCheckpointingConfig::Policy policy;
  int k;
  bool selective;
};

int Main() {
  CommOptions options;
  options.timeout = absl::Minutes(10);
  auto world = CreateMpiWorld(options);
  Check(world.status(), "CreateMpiWorld");
  auto grid_or = ProcessGrid::Create(std::move(world).value(), {1, 1, 1});
  Check(grid_or.status(), "ProcessGrid");
  auto grid = std::make_unique<ProcessGrid>(std::move(grid_or).value());
  const int threads = kernels::DefaultCpuThreads();
  kernels::SetCpuThreads(threads);

  Gpt2Config mc;
  mc.n_layer = absl::GetFlag(FLAGS_layers);
  mc.n_embd = absl::GetFlag(FLAGS_embd);
  mc.n_head = absl::GetFlag(FLAGS_heads);
  mc.vocab_size = absl::GetFlag(FLAGS_vocab);
  mc.seq_len = absl::GetFlag(FLAGS_seq);
  const int B = absl::GetFlag(FLAGS_batch);
  const std::string dtype = absl::GetFlag(FLAGS_compute_dtype);
  const DTypeProto compute = dtype == "bf16" ? BF16 : dtype == "f16" ? F16 : F32;
  const std::vector<int32_t> tokens = RandomTokens(3, B, mc.seq_len, mc.vocab_size);
  std::vector<HostBatch> batches = MicroBatchesForRank(tokens, B, mc.seq_len, 1, 1, 0);
  const std::vector<Batch> views = Views(batches);

  const std::vector<Policy> policies = {{"none", ActivationCheckpointingConfig::NONE, 2, false},
                                        {"every unit", ActivationCheckpointingConfig::EVERY_UNIT, 2, false},
                                        {"every 2nd unit", ActivationCheckpointingConfig::EVERY_KTH, 2, false},
                                        {"selective (every block)", ActivationCheckpointingConfig::NONE, 2, true}};
  std::vector<std::unique_ptr<Engine>> engines;
  std::vector<std::unique_ptr<Model>> plan_models;  // the models the estimates read
  std::vector<int64_t> estimate;
  for (const Policy& p : policies) {
    EngineConfig c;
    c.mutable_parallel()->set_dp(1);
    c.mutable_optimizer()->set_lr(3e-4);
    c.mutable_device()->set_threads_per_rank(threads);
    c.mutable_precision()->set_compute_dtype(compute);
    c.mutable_activation_checkpointing()->set_policy(p.policy);
    c.mutable_activation_checkpointing()->set_k(p.k);
    c.mutable_activation_checkpointing()->set_selective(p.selective);
    auto model = BuildGpt2(mc);
    Check(model.status(), "BuildGpt2");
    auto engine = Engine::Create(c, grid.get(), std::move(model).value());
    Check(engine.status(), "Engine::Create");
    auto plan_model = BuildGpt2(mc);
    Check(plan_model.status(), "BuildGpt2");
    MemoryPlanInputs in;
    in.options = (*engine)->options();
    in.plan = &(*engine)->plan();
    in.model = plan_model->get();
    in.micro_batch = B;
    in.sequence_length = mc.seq_len;
    in.cpu_threads = threads;
    absl::StatusOr<MemoryPlan> plan = PlanMemory(in);
    Check(plan.status(), "PlanMemory");
    estimate.push_back(plan->bytes_of(PlanCategory::kActivations));
    plan_models.push_back(std::move(plan_model).value());
    Check((*engine)->TrainStep(views).status(), "warm-up TrainStep");
    engines.push_back(std::move(engine).value());
  }
  const int repeats = absl::GetFlag(FLAGS_repeats);
  std::vector<std::vector<double>> times(policies.size()), fwd(policies.size()), bwd(policies.size()),
      cpu(policies.size());
  std::vector<int64_t> peak(policies.size(), 0), workspace(policies.size(), 0);
  for (int rep = 0; rep < repeats; ++rep) {
    for (size_t i = 0; i < policies.size(); ++i) {
      engines[i]->memory().ResetPeaks();
      const std::clock_t cpu0 = std::clock();  // the process's CPU time, all threads: steadier than wall time under load
      absl::StatusOr<StepResult> r = engines[i]->TrainStep(views);
      cpu[i].push_back(static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC);
      Check(r.status(), "TrainStep");
      peak[i] = std::max(peak[i], engines[i]->memory().Usage(MemoryCategory::kActivations).peak);
      workspace[i] = std::max(workspace[i], engines[i]->memory().Usage(MemoryCategory::kWorkspace).peak);
      times[i].push_back(r->timings.total);
      fwd[i].push_back(r->timings.forward);
      bwd[i].push_back(r->timings.backward);
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("\n## Activation checkpointing, GPT-2 %d layers C=%d heads=%d V=%d T=%d B=%d, %s compute, 1 rank, %d "
              "threads, median of %d interleaved steps\n\n",
              mc.n_layer, mc.n_embd, mc.n_head, mc.vocab_size, mc.seq_len, B, dtype.c_str(), threads, repeats);
  std::printf("| policy | peak activation bytes | vs none | step time | vs none | forward | backward (incl. recompute) |\n"
              "|---|---|---|---|---|---|---|\n");
  const double t0 = median(times[0]);
  for (size_t i = 0; i < policies.size(); ++i) {
    const double t = median(times[i]);
    std::printf("| %s | %.1f MB | %.3f | %.0f ms | %.3f | %.0f ms | %.0f ms |\n", policies[i].name, peak[i] / 1e6,
                static_cast<double>(peak[i]) / peak[0], t * 1e3, t / t0, median(fwd[i]) * 1e3,
                median(bwd[i]) * 1e3);
  }
  std::printf("\n### Peak activation bytes: measured vs the memory plan's estimate; step CPU time\n\n"
              "| policy | measured | estimate | measured / estimate | estimate vs none | workspace peak | step CPU time "
              "(all threads) | vs none |\n"
              "|---|---|---|---|---|---|---|---|\n");
  const double c0 = median(cpu[0]);
  for (size_t i = 0; i < policies.size(); ++i) {
    std::printf("| %s | %.1f MB | %.1f MB | %.3f | %.3f | %.1f MB | %.0f ms | %.3f |\n", policies[i].name,
                peak[i] / 1e6, estimate[i] / 1e6, static_cast<double>(peak[i]) / estimate[i],
                static_cast<double>(estimate[i]) / estimate[0], workspace[i] / 1e6, median(cpu[i]) * 1e3,
                median(cpu[i]) / c0);
  }
  std::fflush(stdout);
  engines.clear();
  grid.reset();
  FinalizeMpi();
  return 0;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return zeroshard::Main();
}
