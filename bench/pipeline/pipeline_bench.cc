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
//                     chunk's F, B and W the measured per-micro-batch wall
//                     (outside waits) of its stage and each boundary the
//                     measured price of a transfer of its bytes; its
//                     makespan against the measured step (before the
//                     optimizer);
//   equal-cost theory the closed forms of docs/parallelism.md;
// step time relative to GPipe at the same m; and each stage's peak
// activation bytes against the simulator's peak in flight times the bytes
// one kept micro-batch costs there (measured from GPipe).
// The four schedules of one m run side by side, a step each in turn, so
// their ratios (the targets table) come from the same minutes. Per stage,
// the step's time by action kind — wall, the thread's CPU and minor page
// faults (bench/pipeline/action_breakdown.h) — shows where it goes.
// Ranks sharing cores measure their scheduler, not the pipeline: the
// header says how many cores there are per rank.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/bench_util.h"
#include "bench/pipeline/action_breakdown.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_env.h"
#include "comm/process_grid.h"
#include "engine/engine.h"
#include "engine/pipeline_schedule.h"
#include "engine/testing/global_batch.h"
#include "core/memory_tracker.h"
#include "models/gpt2/gpt2.h"

ABSL_FLAG(int, blocks, 8, "transformer blocks (a multiple of 2 x ranks)");
ABSL_FLAG(int, embd, 192, "model width");
ABSL_FLAG(int, vocab, 128, "vocabulary (small: the head on the last stage costs little next to a block)");
ABSL_FLAG(int, seq, 64, "tokens per sequence");
ABSL_FLAG(int, rows, 4, "sequences per micro-batch");
ABSL_FLAG(int, repeats, 5, "timed steps per run (after one warm-up)");

namespace zeroshard {
namespace {

using bench::Median;
using bench::RoundUp;
void Check(const absl::Status& s, const char* what) { bench::CheckOrExit(s, what); }

struct Run {
  ParallelConfig::PipelineSchedule schedule;
  PipelineScheduleKind kind;
  int v = 1;
  int m = 1;
};

// Per rank, medians over the timed steps.
struct StageTimes {
  double bubble = 0, forward = 0, backward = 0, step = 0;  // s; F, B per (chunk, micro-batch)
  double activations_peak = 0;                              // bytes, over the timed steps
  // Per step, medians over steps, by bench::Bucket: ms wall, ms CPU, minor faults.
  std::array<double, bench::kNumBuckets> wall_ms{}, cpu_ms{}, faults{};
  double forwards = 0, backwards = 0, weights = 0;  // actions per step
};

// One engine of a run and its per-step samples.
struct Live {
  Run run;
  std::unique_ptr<Engine> engine;
  std::vector<HostBatch> batches;
  std::vector<Batch> views;
  bench::ActionBreakdown breakdown;
  std::vector<double> bubble, forward, backward, step;
};

std::unique_ptr<Live> Start(ProcessGrid& grid, const Gpt2Config& model, const Run& r) {
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
  auto live = std::make_unique<Live>();
  live->run = r;
  live->engine = std::move(engine).value();
  const int rows = absl::GetFlag(FLAGS_rows) * r.m;
  live->batches =
      MicroBatchesForRank(RandomTokens(7, rows, model.seq_len, model.vocab_size), rows, model.seq_len, 1, r.m, 0);
  live->views = Views(live->batches);
  Check(live->engine->TrainStep(live->views).status(), "warm-up step");
  live->engine->memory().ResetPeaks();
  live->engine->AddObserver(&live->breakdown);
  return live;
}

void TimedStep(Live& live) {
  absl::StatusOr<StepResult> s = live.engine->TrainStep(live.views);
  Check(s.status(), "TrainStep");
  const StepTimings& t = s->timings;
  const Run& r = live.run;
  const double f = t.forward - t.pipeline_wait_forward, b = t.backward - t.pipeline_wait_backward;
  const double window = t.total - t.optimizer;
  live.bubble.push_back(window > 0 ? 1 - (f + b) / window : 0);
  live.forward.push_back(f / (r.m * r.v));
  live.backward.push_back(b / (r.m * r.v));
  live.step.push_back(t.total);
}

StageTimes Finish(Live& live) {
  live.engine->RemoveObserver(&live.breakdown);
  StageTimes out{Median(live.bubble), Median(live.forward), Median(live.backward), Median(live.step),
                 static_cast<double>(live.engine->memory().Usage(MemoryCategory::kActivations).peak)};
  const std::vector<bench::StepBreakdown>& steps = live.breakdown.steps();
  for (int k = 0; k < bench::kNumBuckets; ++k) {
    std::vector<double> wall, cpu, faults;
    for (const bench::StepBreakdown& b : steps) {
      wall.push_back(1e3 * b.wall[k]);
      cpu.push_back(1e3 * b.cpu[k]);
      faults.push_back(b.faults[k]);
    }
    out.wall_ms[k] = Median(wall);
    out.cpu_ms[k] = Median(cpu);
    out.faults[k] = Median(faults);
  }
  if (!steps.empty()) {
    out.forwards = steps[0].forwards;
    out.backwards = steps[0].backwards;
    out.weights = steps[0].weights;
  }
  return out;
}

// The runs of one m side by side: each engine takes one step in turn, so
// the load of a shared machine falls on every schedule alike and their
// ratios come from the same minutes.
std::vector<StageTimes> MeasureSideBySide(ProcessGrid& grid, const Gpt2Config& model, const std::vector<Run>& runs) {
  std::vector<std::unique_ptr<Live>> live;
  for (const Run& r : runs) live.push_back(Start(grid, model, r));
  for (int i = 0; i < absl::GetFlag(FLAGS_repeats); ++i) {
    for (auto& l : live) TimedStep(*l);
  }
  std::vector<StageTimes> out;
  for (auto& l : live) out.push_back(Finish(*l));
  return out;
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

// The schedule simulated with each chunk costing its stage's measured F
// and B per micro-batch.
// One pipeline transfer's price on this machine: latency and bandwidth
// from ping-pongs between ranks 0 and 1 of a header alone and of a header
// with a payload (the executor's two messages), medians of one-way times.
struct TransferPrice {
  double latency = 0;          // s, a header alone
  double bytes_per_second = 0; // of the payload
  int64_t payload_bytes = 0;
  double payload_seconds = 0;  // one-way, header and payload
};

TransferPrice MeasureTransfer(Communicator& world, int64_t payload_bytes) {
  constexpr int kRounds = 21;
  const int me = world.rank();
  std::vector<int32_t> header(64, 0);
  std::vector<float> payload(static_cast<size_t>(payload_bytes / 4), 1.0f);
  auto one_way = [&](bool with_payload) {
    std::vector<double> times;
    for (int i = 0; i < kRounds; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      if (me == 0) {
        Check(world.Send(header.data(), 64, DType::kI32, 1, 1)->Wait(), "ping header");
        if (with_payload) Check(world.Send(payload.data(), payload.size(), DType::kF32, 1, 2)->Wait(), "ping");
        Check(world.Recv(header.data(), 64, DType::kI32, 1, 3)->Wait(), "pong header");
        if (with_payload) Check(world.Recv(payload.data(), payload.size(), DType::kF32, 1, 4)->Wait(), "pong");
      } else if (me == 1) {
        Check(world.Recv(header.data(), 64, DType::kI32, 0, 1)->Wait(), "ping header");
        if (with_payload) Check(world.Recv(payload.data(), payload.size(), DType::kF32, 0, 2)->Wait(), "ping");
        Check(world.Send(header.data(), 64, DType::kI32, 0, 3)->Wait(), "pong header");
        if (with_payload) Check(world.Send(payload.data(), payload.size(), DType::kF32, 0, 4)->Wait(), "pong");
      }
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 2);
    }
    return Median(times);
  };
  TransferPrice price;
  price.payload_bytes = payload_bytes;
  price.latency = one_way(false);
  price.payload_seconds = one_way(true);
  const double extra = price.payload_seconds - price.latency;
  price.bytes_per_second = extra > 0 ? payload_bytes / extra : 0;
  // Rank 0's numbers on every rank: the simulations must agree.
  float mine[3] = {static_cast<float>(price.latency), static_cast<float>(price.bytes_per_second),
                   static_cast<float>(price.payload_seconds)};
  Check(world.Broadcast(mine, 3, DType::kF32, 0)->Wait(), "Broadcast transfer price");
  price.latency = mine[0];
  price.bytes_per_second = mine[1];
  price.payload_seconds = mine[2];
  return price;
}

// The schedule simulated with each chunk costing its stage's measured F,
// B (with recomputes) and W per micro-batch, wall outside waits (ZB-H1's
// first stage runs BW: its W is 0), and each boundary the measured price
// of its transfer.
ScheduleTimeline Simulated(const Run& r, int pp, const std::vector<StageTimes>& stages, const TransferPrice& price) {
  PipelineShape shape{pp, r.v, r.m};
  auto schedule = BuildPipelineSchedule(r.kind, shape);
  Check(schedule.status(), "BuildPipelineSchedule");
  ChunkCosts costs;
  const double per = 1e-3 / (r.m * r.v);  // ms per step -> s per (chunk, micro-batch)
  for (int chunk = 0; chunk < shape.chunks(); ++chunk) {
    const StageTimes& s = stages[chunk % pp];
    costs.forward.push_back(per * s.wall_ms[bench::kBucketForward]);
    costs.backward_input.push_back(per * (s.wall_ms[bench::kBucketBackward] + s.wall_ms[bench::kBucketRecompute]));
    costs.backward_weight.push_back(per * s.wall_ms[bench::kBucketWeight]);
    if (chunk + 1 < shape.chunks()) {
      costs.transfer.push_back(TransferSeconds(price.payload_bytes, price.latency, price.bytes_per_second));
    }
  }
  auto timeline = SimulatePipelineSchedule(*schedule, shape, costs);
  Check(timeline.status(), "SimulatePipelineSchedule");
  return *std::move(timeline);
}

struct Row {
  Run run;
  std::vector<StageTimes> stages;
  ScheduleTimeline simulated;
};

std::string PerStage(const std::vector<double>& v, const char* format) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) absl::StrAppendFormat(&out, "%s%s", i ? " / " : "", absl::StrFormat(format, v[i]));
  return out;
}

void PrintTables(int pp, const std::vector<Row>& rows) {
  std::printf("| schedule | v | m | step ms | vs GPipe | measured bubble | simulated (measured costs) | "
              "measured / simulated | equal-cost theory | bubble per stage, measured | simulated | "
              "step before the optimizer, ms | simulated ms | simulated / measured |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& row : rows) {
    const Run& r = row.run;
    double gpipe_step = 0, step = 0, bubble = 0;
    for (const Row& g : rows) {
      if (g.run.m == r.m && g.run.kind == PipelineScheduleKind::kGpipe) {
        for (const StageTimes& s : g.stages) gpipe_step = std::max(gpipe_step, s.step);
      }
    }
    std::vector<double> measured;
    for (const StageTimes& s : row.stages) {
      step = std::max(step, s.step);
      bubble += s.bubble / pp;
      measured.push_back(s.bubble);
    }
    const double simulated = row.simulated.overall_bubble;
    // The window the simulation covers: the slowest stage's step without
    // its optimizer phase.
    double window = 0;
    for (const StageTimes& s : row.stages) window = std::max(window, 1e3 * s.step - s.wall_ms[bench::kBucketOptimizer]);
    const double simulated_ms = 1e3 * row.simulated.makespan;
    std::printf("| %s | %d | %d | %.1f | %.2f | %.3f | %.3f | %.2f | %.3f | %s | %s | %.1f | %.1f | %.2f |\n",
                ParallelConfig::PipelineSchedule_Name(r.schedule).c_str(), r.v, r.m, 1e3 * step,
                gpipe_step > 0 ? step / gpipe_step : 0, bubble, simulated, simulated > 0 ? bubble / simulated : 0,
                Theory(r.kind, pp, r.m, r.v), PerStage(measured, "%.3f").c_str(),
                PerStage(row.simulated.bubble, "%.3f").c_str(), window, simulated_ms,
                window > 0 ? simulated_ms / window : 0);
  }
  // Per stage s, the bytes one kept micro-batch costs (A_s) and the rest
  // (transients, B_s), from GPipe, which keeps all m: its peaks at m = pp
  // and 2·pp. A schedule's theory is B_s + in_flight_s · A_s / v, with the
  // simulator's peak in flight (chunks when v > 1).
  std::vector<double> per_mb(pp, 0), base(pp, 0);
  const Row *g1 = nullptr, *g2 = nullptr;
  for (const Row& row : rows) {
    if (row.run.kind != PipelineScheduleKind::kGpipe) continue;
    if (row.run.m == pp) g1 = &row;
    if (row.run.m == 2 * pp) g2 = &row;
  }
  if (g1 == nullptr || g2 == nullptr) return;
  for (int s = 0; s < pp; ++s) {
    per_mb[s] = (g2->stages[s].activations_peak - g1->stages[s].activations_peak) / pp;
    base[s] = g1->stages[s].activations_peak - pp * per_mb[s];
  }
  std::vector<double> per_mb_kib, base_kib;
  for (int s = 0; s < pp; ++s) {
    per_mb_kib.push_back(per_mb[s] / 1024);
    base_kib.push_back(base[s] / 1024);
  }
  std::printf("\nPeak activation KiB per stage, measured vs theory B_s + in-flight x A_s / v, where A_s = %s KiB "
              "per kept micro-batch and B_s = %s KiB of transients (from GPipe, which keeps all m, at m = %d and "
              "%d). ZB-H1 also keeps each unit's output gradients from its B to its W (docs/model.md), which the "
              "in-flight count does not see.\n\n",
              PerStage(per_mb_kib, "%.0f").c_str(), PerStage(base_kib, "%.0f").c_str(), pp, 2 * pp);
  std::printf("| schedule | v | m | in flight per stage | measured KiB | theory KiB | measured / theory |\n"
              "|---|---|---|---|---|---|---|\n");
  for (const Row& row : rows) {
    std::vector<double> measured, theory, ratio, in_flight;
    for (int s = 0; s < pp; ++s) {
      const double k = row.simulated.peak_in_flight[s];
      in_flight.push_back(k);
      measured.push_back(row.stages[s].activations_peak / 1024);
      theory.push_back((base[s] + k * per_mb[s] / row.run.v) / 1024);
      ratio.push_back(theory.back() > 0 ? measured.back() / theory.back() : 0);
    }
    std::printf("| %s | %d | %d | %s | %s | %s | %s |\n", ParallelConfig::PipelineSchedule_Name(row.run.schedule).c_str(),
                row.run.v, row.run.m, PerStage(in_flight, "%.0f").c_str(), PerStage(measured, "%.0f").c_str(),
                PerStage(theory, "%.0f").c_str(), PerStage(ratio, "%.2f").c_str());
  }
}

const Row* Find(const std::vector<Row>& rows, PipelineScheduleKind kind, int m) {
  for (const Row& row : rows) {
    if (row.run.kind == kind && row.run.m == m) return &row;
  }
  return nullptr;
}

// Per stage of each run, where the step goes (ms of wall / CPU per step,
// medians over steps) and the minor page faults per step; then, per
// micro-batch, B + W against the unsplit backward.
void PrintBreakdown(const std::vector<Row>& rows) {
  std::printf("\nWhere each stage's step goes: ms wall / ms CPU per step (medians over steps); F and B exclude "
              "the time blocked for a neighbour (`wait`); `between` is the transport's progress between actions "
              "and the sends' drain; faults = minor page faults per step.\n\n| schedule | v | m | stage |");
  for (int k = 0; k < bench::kNumBuckets; ++k) std::printf(" %s |", bench::BucketName(k));
  std::printf(" sum | faults |\n|---|---|---|---|");
  for (int k = 0; k <= bench::kNumBuckets + 1; ++k) std::printf("---|");
  std::printf("\n");
  for (const Row& row : rows) {
    for (size_t s = 0; s < row.stages.size(); ++s) {
      const StageTimes& t = row.stages[s];
      std::printf("| %s | %d | %d | %zu |", ParallelConfig::PipelineSchedule_Name(row.run.schedule).c_str(), row.run.v,
                  row.run.m, s);
      double wall = 0, cpu = 0, faults = 0;
      for (int k = 0; k < bench::kNumBuckets; ++k) {
        std::printf(" %.1f / %.1f |", t.wall_ms[k], t.cpu_ms[k]);
        wall += t.wall_ms[k];
        cpu += t.cpu_ms[k];
        faults += t.faults[k];
      }
      std::printf(" %.1f / %.1f | %.0f |\n", wall, cpu, faults);
    }
  }
  std::printf("\nBackward per micro-batch and stage, ms of CPU (the wall of a shared machine is mostly "
              "descheduling): ZB-H1's B + W against 1F1B's unsplit BW, with F, at the same m. ZB-H1's first stage "
              "runs each B with its W as one BW (docs/parallelism.md).\n\n| m | stage | 1F1B F | 1F1B BW | "
              "ZB-H1 F | ZB-H1 B (BW) | ZB-H1 W | B + W | (B + W) / BW |\n|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& zb : rows) {
    if (zb.run.kind != PipelineScheduleKind::kZeroBubbleH1) continue;
    const Row* ob = Find(rows, PipelineScheduleKind::kOneFOneB, zb.run.m);
    if (ob == nullptr) continue;
    for (size_t s = 0; s < zb.stages.size(); ++s) {
      const StageTimes& z = zb.stages[s];
      const StageTimes& o = ob->stages[s];
      const double m = zb.run.m;  // one chunk per stage: per micro-batch = per step / m
      const double b = z.cpu_ms[bench::kBucketBackward] / m, w = z.cpu_ms[bench::kBucketWeight] / m;
      const double bw = o.cpu_ms[bench::kBucketBackward] / m;
      std::printf("| %d | %zu | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", zb.run.m, s,
                  o.cpu_ms[bench::kBucketForward] / m, bw, z.cpu_ms[bench::kBucketForward] / m, b, w, b + w,
                  bw > 0 ? (b + w) / bw : 0);
    }
  }
}

// The slowest stage's step (wall) and its CPU outside waits and the
// optimizer phase.
double StepOf(const Row& row) {
  double step = 0;
  for (const StageTimes& s : row.stages) step = std::max(step, s.step);
  return step;
}
double BusyCpuOf(const Row& row) {
  double busy = 0;
  for (const StageTimes& s : row.stages) {
    double cpu = 0;
    // Waits spin in MPI, and the optimizer's collectives too; the update
    // itself is the same for every schedule.
    for (int k = 0; k < bench::kNumBuckets; ++k) {
      if (k != bench::kBucketWait && k != bench::kBucketOptimizer) cpu += s.cpu_ms[k];
    }
    busy = std::max(busy, cpu);
  }
  return busy;
}
double BubbleOf(const Row& row) {
  double bubble = 0;
  for (const StageTimes& s : row.stages) bubble += s.bubble / row.stages.size();
  return bubble;
}

// The targets at every m, as ratios of one run's medians.
void PrintTargets(const std::vector<Row>& rows) {
  std::printf("\nTargets against 1F1B at the same m, from this run (the schedules step in turn): ZB-H1's bubble "
              "(<= 0.5) and step (<= 0.97), interleaved's step (<= 1.00); `busy CPU` = the slowest stage's CPU "
              "per step outside waits and the optimizer, the compute a schedule adds.\n\n| m | ZB-H1 bubble / 1F1B | ZB-H1 step / "
              "1F1B | interleaved step / 1F1B | ZB-H1 busy CPU / 1F1B | interleaved busy CPU / 1F1B | 1F1B step ms "
              "| 1F1B busy CPU ms |\n|---|---|---|---|---|---|---|---|\n");
  for (const Row& ob : rows) {
    if (ob.run.kind != PipelineScheduleKind::kOneFOneB) continue;
    const Row* zb = Find(rows, PipelineScheduleKind::kZeroBubbleH1, ob.run.m);
    const Row* il = Find(rows, PipelineScheduleKind::kInterleaved1F1B, ob.run.m);
    if (zb == nullptr || il == nullptr) continue;
    std::printf("| %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f |\n", ob.run.m, BubbleOf(*zb) / BubbleOf(ob),
                StepOf(*zb) / StepOf(ob), StepOf(*il) / StepOf(ob), BusyCpuOf(*zb) / BusyCpuOf(ob),
                BusyCpuOf(*il) / BusyCpuOf(ob), 1e3 * StepOf(ob), BusyCpuOf(ob));
  }
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
  model.n_layer = absl::GetFlag(FLAGS_blocks);
  model.n_embd = absl::GetFlag(FLAGS_embd);
  model.n_head = 4;
  model.vocab_size = absl::GetFlag(FLAGS_vocab);
  model.seq_len = absl::GetFlag(FLAGS_seq);
  if (model.n_layer % (2 * pp) != 0) {
    std::fprintf(stderr, "pipeline_bench: --blocks %d must be a multiple of 2 x %d ranks (v = 2)\n", model.n_layer, pp);
    return 2;
  }
  const bool root = grid.world().rank() == 0;
  if (root) {
    const unsigned cores = std::thread::hardware_concurrency();
    std::printf("\n## Pipeline bubble, pp = %d (dp 1), GPT-2 %d blocks x %d wide, vocab %d, %d x %d tokens per "
                "micro-batch, ZeRO 0, f32, one thread per rank; %u cores for %d ranks%s\n\n",
                pp, model.n_layer, model.n_embd, model.vocab_size, absl::GetFlag(FLAGS_rows), model.seq_len, cores,
                pp, cores < static_cast<unsigned>(pp) ? " (oversubscribed: waits include descheduling)" : "");
  }
  // The boundary carries one (rows, seq, C) f32 tensor each way.
  const TransferPrice price = MeasureTransfer(
      grid.world(), int64_t{4} * absl::GetFlag(FLAGS_rows) * model.seq_len * model.n_embd);
  if (root) {
    std::printf("A transfer of %.0f KiB (header and payload): %.0f us one-way; header alone %.0f us; payload %.2f "
                "GB/s (ping-pong medians between ranks 0 and 1), the simulation's price per boundary.\n\n",
                price.payload_bytes / 1024.0, 1e6 * price.payload_seconds, 1e6 * price.latency,
                price.bytes_per_second / 1e9);
  }
  std::vector<Run> runs;
  for (int m : {pp, 2 * pp, 4 * pp}) {
    runs.push_back({ParallelConfig::GPIPE, PipelineScheduleKind::kGpipe, 1, m});
    runs.push_back({ParallelConfig::ONE_F_ONE_B, PipelineScheduleKind::kOneFOneB, 1, m});
    runs.push_back({ParallelConfig::INTERLEAVED_1F1B, PipelineScheduleKind::kInterleaved1F1B, 2, m});
    runs.push_back({ParallelConfig::ZERO_BUBBLE_H1, PipelineScheduleKind::kZeroBubbleH1, 1, m});
  }
  std::vector<Row> rows;
  std::vector<StageTimes> measured;
  for (size_t i = 0; i < runs.size(); i += 4) {
    const std::vector<Run> group(runs.begin() + i, runs.begin() + i + 4);  // one m
    for (const StageTimes& t : MeasureSideBySide(grid, model, group)) measured.push_back(t);
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    const Run& r = runs[i];
    const StageTimes& mine = measured[i];
    // Every stage's numbers on every rank: the scalars, then the breakdown.
    std::vector<float> local = {static_cast<float>(mine.bubble),    static_cast<float>(mine.forward),
                                static_cast<float>(mine.backward),  static_cast<float>(mine.step),
                                static_cast<float>(mine.activations_peak), static_cast<float>(mine.forwards),
                                static_cast<float>(mine.backwards), static_cast<float>(mine.weights)};
    for (const auto* a : {&mine.wall_ms, &mine.cpu_ms, &mine.faults}) local.insert(local.end(), a->begin(), a->end());
    const int fields = static_cast<int>(local.size());
    std::vector<float> all(static_cast<size_t>(fields) * pp);
    Check(grid.world().AllGather(local.data(), all.data(), fields, DType::kF32)->Wait(), "AllGather");
    Row row;
    row.run = r;
    for (int s = 0; s < pp; ++s) {
      const float* f = &all[static_cast<size_t>(fields) * s];
      StageTimes t{f[0], f[1], f[2], f[3], f[4]};
      t.forwards = f[5];
      t.backwards = f[6];
      t.weights = f[7];
      for (int k = 0; k < bench::kNumBuckets; ++k) {
        t.wall_ms[k] = f[8 + k];
        t.cpu_ms[k] = f[8 + bench::kNumBuckets + k];
        t.faults[k] = f[8 + 2 * bench::kNumBuckets + k];
      }
      row.stages.push_back(t);
    }
    row.simulated = Simulated(r, pp, row.stages, price);
    rows.push_back(std::move(row));
  }
  if (root) {
    PrintTables(pp, rows);
    PrintBreakdown(rows);
    PrintTargets(rows);
    std::printf("\nMedians over %d steps per run (after one warm-up). Bubble = idle share of the step before the "
                "optimizer; overall = mean over stages.\n",
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
