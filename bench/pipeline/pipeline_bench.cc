// Pipeline benchmark: run under `mpirun -np P` (bench/pipeline/run.sh), one
// rank per stage (dp 1, pp = P). For each schedule and micro-batch count m
// in {P, 2P, 4P}, a GPT-2 whose stages hold the same blocks (embed on the
// first, head on the last) trains --repeats steps after one warm-up, and
// the table compares, per run:
//   measured bubble   1 − busy / window per stage, averaged over stages,
//                     median over steps; busy = forward + backward minus the
//                     time blocked for a neighbour (StepTimings), window =
//                     step time minus the optimizer;
//   simulated bubble  SimulatePipelineSchedule of the same schedule with each
//                     chunk's F and B the measured per-micro-batch averages
//                     of its stage (ZB-H1: W = B / 2, the weight half of the
//                     matmuls' backward);
//   equal-cost theory the closed forms of docs/parallelism.md.
// Ranks sharing cores measure their scheduler, not the pipeline: the
// header says how many cores there are per rank.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_env.h"
#include "comm/process_grid.h"
#include "engine/engine.h"
#include "engine/pipeline_schedule.h"
#include "engine/testing/global_batch.h"
#include "nn/gpt2.h"

ABSL_FLAG(int, layers_per_stage, 2, "transformer blocks per stage");
ABSL_FLAG(int, embd, 128, "model width");
ABSL_FLAG(int, vocab, 512, "vocabulary");
ABSL_FLAG(int, seq, 64, "tokens per sequence");
ABSL_FLAG(int, rows, 2, "sequences per micro-batch");
ABSL_FLAG(int, repeats, 5, "timed steps per run (after one warm-up)");

namespace zeroshard {
namespace {

void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, std::string(s.message()).c_str());
    std::exit(1);
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Run {
  ParallelConfig::PipelineSchedule schedule;
  PipelineScheduleKind kind;
  int v = 1;
  int m = 1;
};

// Per rank, medians over the timed steps.
struct StageTimes {
  double bubble = 0, forward = 0, backward = 0, step = 0;  // s; F, B per (chunk, micro-batch)
};

StageTimes Measure(ProcessGrid& grid, const Gpt2Config& model, const Run& r) {
  const int pp = grid.shape().pp;
  EngineConfig c;
  c.mutable_zero()->set_stage(0);
  c.set_gradient_accumulation_steps(r.m);
  c.mutable_parallel()->set_pp(pp);
  c.mutable_parallel()->set_pipeline_schedule(r.schedule);
  c.mutable_parallel()->set_virtual_stages(r.v);
  // Equal chunks of blocks; embed joins the first, the head the last.
  const int chunks = pp * r.v, blocks = model.n_layer / chunks;
  for (int k = 0; k < chunks; ++k) c.mutable_parallel()->add_pp_partition(blocks + (k == 0) + (k == chunks - 1));
  c.mutable_optimizer()->set_lr(1e-4);
  c.mutable_device()->set_threads_per_rank(1);
  auto built = BuildGpt2(model);
  Check(built.status(), "BuildGpt2");
  auto engine = Engine::Create(c, &grid, std::move(built).value());
  Check(engine.status(), "Engine::Create");
  const int rows = absl::GetFlag(FLAGS_rows) * r.m;
  std::vector<HostBatch> batches =
      MicroBatchesForRank(RandomTokens(7, rows, model.seq_len, model.vocab_size), rows, model.seq_len, 1, r.m, 0);
  const std::vector<Batch> views = Views(batches);
  Check((*engine)->TrainStep(views).status(), "warm-up step");
  std::vector<double> bubble, forward, backward, step;
  for (int i = 0; i < absl::GetFlag(FLAGS_repeats); ++i) {
    absl::StatusOr<StepResult> s = (*engine)->TrainStep(views);
    Check(s.status(), "TrainStep");
    const StepTimings& t = s->timings;
    const double f = t.forward - t.pipeline_wait_forward, b = t.backward - t.pipeline_wait_backward;
    const double window = t.total - t.optimizer;
    bubble.push_back(window > 0 ? 1 - (f + b) / window : 0);
    forward.push_back(f / (r.m * r.v));
    backward.push_back(b / (r.m * r.v));
    step.push_back(t.total);
  }
  return {Median(bubble), Median(forward), Median(backward), Median(step)};
}

double Theory(PipelineScheduleKind kind, int p, int m, int v) {
  switch (kind) {
    case PipelineScheduleKind::kInterleaved1F1B:
      return (p - 1.0) / (v * m + p - 1.0);
    case PipelineScheduleKind::kZeroBubbleH1:
      return (p - 1.0) / (3.0 * m + p - 1.0);
    default:
      return (p - 1.0) / (m + p - 1.0);
  }
}

double Simulated(const Run& r, int pp, const std::vector<StageTimes>& stages) {
  PipelineShape shape{pp, r.v, r.m};
  auto schedule = BuildPipelineSchedule(r.kind, shape);
  Check(schedule.status(), "BuildPipelineSchedule");
  ChunkCosts costs;
  const bool split = r.kind == PipelineScheduleKind::kZeroBubbleH1;
  for (int chunk = 0; chunk < shape.chunks(); ++chunk) {
    const StageTimes& s = stages[chunk % pp];
    costs.forward.push_back(s.forward);
    costs.backward_input.push_back(split ? s.backward / 2 : s.backward);
    costs.backward_weight.push_back(split ? s.backward / 2 : 0);
  }
  auto timeline = SimulatePipelineSchedule(*schedule, shape, costs);
  Check(timeline.status(), "SimulatePipelineSchedule");
  return timeline->overall_bubble;
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  CommOptions options;
  options.timeout = absl::Minutes(10);
  auto world = CreateMpiWorld(options);
  Check(world.status(), "CreateMpiWorld");
  const int pp = (*world)->size();
  if (pp < 2) {
    std::fprintf(stderr, "pipeline_bench: needs at least 2 ranks (one per stage), got %d\n", pp);
    return 2;
  }
  auto grid_or = ProcessGrid::Create(std::move(world).value(), {1, 1, pp});
  Check(grid_or.status(), "ProcessGrid::Create");
  ProcessGrid grid = std::move(grid_or).value();
  Gpt2Config model;
  model.n_layer = absl::GetFlag(FLAGS_layers_per_stage) * pp * 2;  // room for v = 2
  model.n_embd = absl::GetFlag(FLAGS_embd);
  model.n_head = 4;
  model.vocab_size = absl::GetFlag(FLAGS_vocab);
  model.seq_len = absl::GetFlag(FLAGS_seq);
  const bool root = grid.world().rank() == 0;
  if (root) {
    const unsigned cores = std::thread::hardware_concurrency();
    std::printf("\n## Pipeline bubble, pp = %d (dp 1), GPT-2 %d blocks x %d wide, vocab %d, %d x %d tokens per "
                "micro-batch, ZeRO 0, f32; %u cores for %d ranks%s\n\n",
                pp, model.n_layer, model.n_embd, model.vocab_size, absl::GetFlag(FLAGS_rows), model.seq_len, cores,
                pp, cores < static_cast<unsigned>(pp) ? " (oversubscribed: waits include descheduling)" : "");
    std::printf("| schedule | v | m | step ms | measured bubble | simulated (measured costs) | equal-cost theory | "
                "measured / simulated |\n|---|---|---|---|---|---|---|---|\n");
  }
  std::vector<Run> runs;
  for (int m : {pp, 2 * pp, 4 * pp}) {
    runs.push_back({ParallelConfig::GPIPE, PipelineScheduleKind::kGpipe, 1, m});
    runs.push_back({ParallelConfig::ONE_F_ONE_B, PipelineScheduleKind::kOneFOneB, 1, m});
    runs.push_back({ParallelConfig::INTERLEAVED_1F1B, PipelineScheduleKind::kInterleaved1F1B, 2, m});
    runs.push_back({ParallelConfig::ZERO_BUBBLE_H1, PipelineScheduleKind::kZeroBubbleH1, 1, m});
  }
  for (const Run& r : runs) {
    const StageTimes mine = Measure(grid, model, r);
    std::vector<float> all(4 * pp);
    const float local[4] = {static_cast<float>(mine.bubble), static_cast<float>(mine.forward),
                            static_cast<float>(mine.backward), static_cast<float>(mine.step)};
    Check(grid.world().AllGather(local, all.data(), 4, DType::kF32)->Wait(), "AllGather");
    if (!root) continue;
    std::vector<StageTimes> stages(pp);
    double bubble = 0, step = 0;
    for (int s = 0; s < pp; ++s) {
      stages[s] = {all[4 * s], all[4 * s + 1], all[4 * s + 2], all[4 * s + 3]};
      bubble += stages[s].bubble / pp;
      step = std::max(step, stages[s].step);
    }
    const double simulated = Simulated(r, pp, stages);
    std::printf("| %s | %d | %d | %.1f | %.3f | %.3f | %.3f | %.2f |\n", ParallelConfig::PipelineSchedule_Name(r.schedule).c_str(),
                r.v, r.m, 1e3 * step, bubble, simulated, Theory(r.kind, pp, r.m, r.v),
                simulated > 0 ? bubble / simulated : 0);
  }
  if (root) {
    std::printf("\nMedians over %d steps per run (after one warm-up). Bubble = idle share of the step before the "
                "optimizer, averaged over stages.\n",
                absl::GetFlag(FLAGS_repeats));
  }
  return 0;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  const int code = zeroshard::Main(argc, argv);  // the grid is gone before MPI finalises
  zeroshard::FinalizeMpi();
  return code;
}
