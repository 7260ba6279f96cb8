// ZeRO benchmark: run under `mpirun -np N` (bench/zero/run.sh does N = 1, 2, 4, and 4, 8 for the grid table).
//
//   memory: per stage, one step of a GPT-2 124M-shaped model (C=768, 12 heads,
//           V=50257, 1024 positions; --mem_layers blocks): tracked bytes per
//           rank by category vs. theory, and the ratio.
//   comm:   bytes each rank sent per step (all-gather + reduce-scatter) vs.
//           2Ψ(N−1)/N (stages 0–2) and (3Ψ − Ψ_turn)(N−1)/N (stage 3)
//           elements, Ψ_turn the head's needs, gathered once for both passes.
//   time:   step time of every stage on a smaller GPT-2 (--time_* flags),
//           and of one rank alone on the same micro-batch (the reference),
//           the stages interleaved step by step in one run, median of
//           --repeats; exposed communication (time blocked in waits) vs. the
//           same collectives timed alone, giving the share hidden by compute.
//
//   precision: per stage, the params and grads categories with f32 and with
//           bf16 compute after one step (and the grads peak during it).
//   grid:   (--grid_memory) model-state bytes per rank at every --layouts
//           (dp, tp, pp) layout the world size fits, per ZeRO stage and
//           pipeline stage, vs. the ZeRO formula over the elements the rank
//           holds: its stage's units at Ψ_tp = split / tp + replicated, with
//           N = dp, plus the tied embedding's mirror at its parameters and
//           gradient only (bench::ZeroMirrorTheory).
//
// The memory and comm tables use f32 compute, so the theory is the ZeRO
// paper's formulas (docs/sharding.md) with 4-byte params and grads:
// stage 0: 20Ψ, 1: 8Ψ + 12Ψ/N, 2: 4Ψ + 16Ψ/N, 3: 20Ψ/N bytes
// (4 + 4 + 4 master + 8 AdamW).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/bench_util.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "comm/mpi_communicator.h"
#include "comm/process_grid.h"
#include "engine/engine.h"
#include "engine/testing/global_batch.h"
#include "kernels/context.h"
#include "models/gpt2/gpt2.h"
#include "nn/param_spec.h"

ABSL_FLAG(bool, memory, true, "run the memory and comm tables");
ABSL_FLAG(bool, time, true, "run the step-time table");
ABSL_FLAG(bool, precision_memory, true, "run the f32-vs-bf16 params/grads memory table");
ABSL_FLAG(bool, grid_memory, false, "run the model-state table of --layouts (dp, tp, pp) layouts");
ABSL_FLAG(std::string, layouts, "1x2x2,2x1x2,2x2x1,1x1x4,2x2x2,1x4x2,2x4x1,1x2x4",
          "dpxtpxpp layouts for --grid_memory; those whose product is the world size run");
ABSL_FLAG(int, mem_layers, 2, "transformer blocks of the 124M-shaped model (12 in GPT-2 small)");
ABSL_FLAG(int, mem_seq, 16, "tokens per sequence for the memory step");
ABSL_FLAG(int, time_layers, 4, "blocks of the timing model");
ABSL_FLAG(int, time_embd, 256, "width of the timing model");
ABSL_FLAG(int, time_vocab, 8192, "vocabulary of the timing model");
ABSL_FLAG(int, time_seq, 64, "sequence length of the timing model");
ABSL_FLAG(int, time_batch, 4, "sequences per rank per step");
ABSL_FLAG(int, repeats, 7, "timed steps per stage (after one warm-up)");
ABSL_FLAG(int, prefetch, 1, "stage-3 prefetch");
ABSL_FLAG(int64_t, bucket_bytes, 25 << 20, "reduce-scatter bucket bytes");

namespace zeroshard {
namespace {

using bench::Median;
using bench::RoundUp;
void Check(const absl::Status& s, const char* what) { bench::CheckOrExit(s, what); }

using Clock = std::chrono::steady_clock;

ProcessGrid* MakeGrid() {
  CommOptions options;
  options.timeout = absl::Minutes(10);
  auto world = CreateMpiWorld(options);
  if (!world.ok()) {
    std::fprintf(stderr, "%s\n", std::string(world.status().message()).c_str());
    std::exit(1);
  }
  const int n = (*world)->size();
  auto grid = ProcessGrid::Create(std::move(world).value(), {n, 1, 1});
  if (!grid.ok()) std::exit(1);
  return new ProcessGrid(std::move(grid).value());
}

EngineConfig Config(int stage, int dp, int threads) {
  EngineConfig c;
  c.mutable_zero()->set_stage(stage);
  c.mutable_zero()->set_prefetch(absl::GetFlag(FLAGS_prefetch));
  c.mutable_zero()->set_bucket_bytes(absl::GetFlag(FLAGS_bucket_bytes));
  c.mutable_parallel()->set_dp(dp);
  c.mutable_optimizer()->set_lr(6e-4);
  c.mutable_device()->set_threads_per_rank(threads);
  return c;
}

// The memory tables' model (--mem_layers of GPT-2 124M's 12) and one
// sequence of --mem_seq tokens per rank.
struct MemoryBenchInput {
  explicit MemoryBenchInput(ProcessGrid& grid) {
    const int n = grid.dp().size();
    model.n_layer = absl::GetFlag(FLAGS_mem_layers);
    const int T = absl::GetFlag(FLAGS_mem_seq);
    batches = MicroBatchesForRank(RandomTokens(1, n, T, model.vocab_size), n, T, n, 1, grid.dp_rank());
    views = Views(batches);
  }
  Gpt2Config model;
  std::vector<HostBatch> batches;
  std::vector<Batch> views;
};

void MemoryAndComm(ProcessGrid& grid, int threads) {
  const int n = grid.dp().size();
  const bool root = grid.dp_rank() == 0;
  const MemoryBenchInput input(grid);
  const Gpt2Config& mc = input.model;
  const std::vector<Batch>& views = input.views;
  if (root) {
    std::printf("\n## Model-state memory per rank, GPT-2 124M-shaped with %d of 12 layers, dp = %d (f32 compute)\n\n",
                mc.n_layer, n);
    std::printf("| stage | Ψ | params | grads | master | optimizer | total measured | theory | measured / theory |"
                " gathered peak (stage 3) |\n|---|---|---|---|---|---|---|---|---|---|\n");
  }
  std::vector<std::string> comm_rows;
  for (int stage = 0; stage <= 3; ++stage) {
    auto model = BuildGpt2(mc);
    Check(model.status(), "BuildGpt2");
    const double psi = static_cast<double>((*model)->num_params());
    auto engine = Engine::Create(Config(stage, n, threads), &grid, std::move(model).value());
    Check(engine.status(), "Engine::Create");
    int64_t padded = 0, turnaround = 0, turnaround_padded = 0;
    for (int u = 0; u < (*engine)->num_units(); ++u) padded += (*engine)->layout(u).padded_numel();
    for (int u : (*engine)->plan().units.back().needs) {
      turnaround += (*engine)->layout(u).numel();
      turnaround_padded += (*engine)->layout(u).padded_numel();
    }
    (*engine)->memory().ResetPeaks();
    const CommStats before = (*engine)->comm_stats();
    Check((*engine)->TrainStep(views).status(), "TrainStep");
    const CommStats c = (*engine)->comm_stats() - before;
    const MemoryTracker& m = (*engine)->memory();
    const int64_t params = m.Usage(MemoryCategory::kParams).current;
    const int64_t grads = m.Usage(MemoryCategory::kGrads).current;
    const int64_t master = m.Usage(MemoryCategory::kMasterParams).current;
    const int64_t optim = m.Usage(MemoryCategory::kOptimizerState).current;
    const int64_t total = params + grads + master + optim;
    const double theory = bench::ZeroStateTheory(stage, psi, n);
    const int64_t shard_bytes = stage == 3 ? params : 0;
    if (root) {
      std::printf("| %d | %.0f | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %.6f | %s |\n", stage, psi,
                  params / 1e6, grads / 1e6, master / 1e6, optim / 1e6, total / 1e6, theory / 1e6, total / theory,
                  stage == 3 ? absl::StrFormat("%.1f MB", (m.Usage(MemoryCategory::kParams).peak - shard_bytes) / 1e6)
                                   .c_str()
                             : "-");
    }
    const int64_t moved = c[CommOp::kAllGather].bytes_sent + c[CommOp::kReduceScatter].bytes_sent;
    const double comm_theory = 4 * bench::ZeroCommTheory(stage, psi, n, static_cast<double>(turnaround));
    const double comm_padded =
        4 * bench::ZeroCommTheory(stage, static_cast<double>(padded), n, static_cast<double>(turnaround_padded));
    comm_rows.push_back(absl::StrFormat("| %d | %.2f MB | %.2f MB | %.2f MB | %s | %lld B |", stage, moved / 1e6,
                                        comm_theory / 1e6, comm_padded / 1e6,
                                        n == 1 ? "-" : absl::StrFormat("%.6f", moved / comm_theory).c_str(),
                                        static_cast<long long>(c[CommOp::kAllReduce].bytes_sent)));
  }
  if (root) {
    std::printf("\n## Bytes sent per rank per step (all-gather + reduce-scatter), dp = %d\n\n", n);
    std::printf("| stage | measured | theory (Ψ) | theory (padded Ψ) | measured / theory(Ψ) | scalar all-reduces |\n"
                "|---|---|---|---|---|---|\n");
    for (const std::string& row : comm_rows) std::printf("%s\n", row.c_str());
  }
}

// bf16 compute stores parameters (full, gathered or shard) and the full
// gradients in 2 bytes; the master, the optimizer state and the reduced
// gradient shard stay f32.
void PrecisionMemory(ProcessGrid& grid, int threads) {
  const int n = grid.dp().size();
  const bool root = grid.dp_rank() == 0;
  const MemoryBenchInput input(grid);
  const Gpt2Config& mc = input.model;
  const std::vector<Batch>& views = input.views;
  if (root) {
    std::printf("\n## Params and grads per rank, f32 vs bf16 compute, GPT-2 124M-shaped with %d of 12 layers, dp = %d"
                "\n\nAfter one step (grads peak: during it).\n\n",
                mc.n_layer, n);
    std::printf("| stage | params f32 | params bf16 | ratio | grads f32 | grads bf16 | ratio | grads peak f32 |"
                " grads peak bf16 | ratio |\n|---|---|---|---|---|---|---|---|---|---|\n");
  }
  for (int stage = 0; stage <= 3; ++stage) {
    int64_t params[2], grads[2], grads_peak[2];
    for (int d = 0; d < 2; ++d) {
      EngineConfig c = Config(stage, n, threads);
      c.mutable_precision()->set_compute_dtype(d == 0 ? F32 : BF16);
      auto model = BuildGpt2(mc);
      Check(model.status(), "BuildGpt2");
      auto engine = Engine::Create(c, &grid, std::move(model).value());
      Check(engine.status(), "Engine::Create");
      (*engine)->memory().ResetPeaks();
      Check((*engine)->TrainStep(views).status(), "TrainStep");
      const MemoryTracker& m = (*engine)->memory();
      params[d] = m.Usage(MemoryCategory::kParams).current;
      grads[d] = m.Usage(MemoryCategory::kGrads).current;
      grads_peak[d] = m.Usage(MemoryCategory::kGrads).peak;
    }
    if (root) {
      std::printf("| %d | %.1f MB | %.1f MB | %.3f | %.1f MB | %.1f MB | %.3f | %.1f MB | %.1f MB | %.3f |\n", stage,
                  params[0] / 1e6, params[1] / 1e6, static_cast<double>(params[1]) / params[0], grads[0] / 1e6,
                  grads[1] / 1e6, static_cast<double>(grads[1]) / grads[0], grads_peak[0] / 1e6, grads_peak[1] / 1e6,
                  static_cast<double>(grads_peak[1]) / grads_peak[0]);
    }
  }
}

struct GridLayout {
  int dp = 1, tp = 1, pp = 1;
};

// The --layouts entries whose dp·tp·pp is the world size.
std::vector<GridLayout> LayoutsForWorld(int world_size) {
  std::vector<GridLayout> out;
  for (absl::string_view item : absl::StrSplit(absl::GetFlag(FLAGS_layouts), ',', absl::SkipEmpty())) {
    const std::vector<std::string> dims = absl::StrSplit(item, 'x');
    GridLayout l;
    if (dims.size() != 3 || !absl::SimpleAtoi(dims[0], &l.dp) || !absl::SimpleAtoi(dims[1], &l.tp) ||
        !absl::SimpleAtoi(dims[2], &l.pp) || l.dp < 1 || l.tp < 1 || l.pp < 1) {
      std::fprintf(stderr, "--layouts: '%s' is not DPxTPxPP\n", std::string(item).c_str());
      std::exit(2);
    }
    if (l.dp * l.tp * l.pp == world_size) out.push_back(l);
  }
  return out;
}

ProcessGrid MakeGrid(const GridLayout& l) {
  CommOptions options;
  options.timeout = absl::Minutes(10);
  auto world = CreateMpiWorld(options);
  Check(world.status(), "CreateMpiWorld");
  auto grid = ProcessGrid::Create(std::move(world).value(), {l.dp, l.tp, l.pp});
  Check(grid.status(), "ProcessGrid::Create");
  return std::move(grid).value();
}

// Elements of `unit`'s parameters on one tp rank, from their declarations
// (not the engine's layouts): split parameters' slices (the padded
// vocabulary included), replicated ones whole. Σ over units = Ψ_tp.
int64_t TpLocalElements(const Unit& unit, int tp) {
  int64_t n = 0;
  for (const ParamSpec& p : unit.params()) {
    absl::StatusOr<std::vector<int64_t>> shape = LocalShape(p, tp);
    Check(shape.status(), "LocalShape");
    int64_t e = 1;
    for (int64_t d : *shape) e *= d;
    n += e;
  }
  return n;
}

// What one rank reports for the grid table (gathered as int64 over the world).
struct RankState {
  int64_t pp_rank, held_mask, mirror_mask, psi_held, psi_mirror, params, grads, master, optim;
  int64_t total() const { return params + grads + master + optim; }
  // The ZeRO formula over its own units, and the mirror's parameters and gradient.
  double Theory(int stage, int dp) const {
    return bench::ZeroStateTheory(stage, static_cast<double>(psi_held), dp) +
           bench::ZeroMirrorTheory(stage, static_cast<double>(psi_mirror), dp);
  }
};

// "embed..h.0", "h.1..head + embed (mirror)": the units a rank holds.
std::string HeldUnits(const std::vector<std::string>& names, int64_t held, int64_t mirrors) {
  std::vector<std::string> own, mirrored;
  for (size_t u = 0; u < names.size(); ++u) {
    if ((held >> u & 1) == 0) continue;
    ((mirrors >> u & 1) ? mirrored : own).push_back(names[u]);
  }
  std::string s = own.empty() ? "" : own.size() == 1 ? own[0] : absl::StrCat(own.front(), "..", own.back());
  for (const std::string& m : mirrored) absl::StrAppend(&s, " + ", m, " (mirror)");
  return s;
}

// Model-state bytes per rank at each (dp, tp, pp) layout of --layouts that
// fits the world: one 1F1B step of the 124M-shaped model (sequence
// parallelism when tp > 1), then the tracker's params, grads, master and
// optimizer bytes against the ZeRO formula over the rank's Ψ_tp with N = dp.
// One row per pipeline stage (its dp 0, tp 0 rank); the ratio column is the
// one furthest from 1 over all the stage's dp × tp ranks.
void GridMemory(int world_rank, int world_size, int threads) {
  const bool root = world_rank == 0;
  const std::vector<GridLayout> layouts = LayoutsForWorld(world_size);
  if (root && !layouts.empty()) {
    std::printf("\n## Model-state memory per rank at (dp, tp, pp), GPT-2 124M-shaped with %d of 12 layers, %d ranks"
                " (f32 compute)\n\n",
                absl::GetFlag(FLAGS_mem_layers), world_size);
    std::printf("| dp, tp, pp | ZeRO | pp stage | units held | Ψ_tp held | params | grads | master | optimizer |"
                " measured | formula | measured / formula |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  }
  for (const GridLayout& l : layouts) {
    ProcessGrid grid = MakeGrid(l);
    Gpt2Config mc;
    mc.n_layer = absl::GetFlag(FLAGS_mem_layers);
    mc.vocab_multiple = l.tp;
    const int T = absl::GetFlag(FLAGS_mem_seq);
    std::vector<HostBatch> batches =
        MicroBatchesForRank(RandomTokens(1, l.dp, T, mc.vocab_size), l.dp, T, l.dp, 1, grid.dp_rank());
    const std::vector<Batch> views = Views(batches);
    for (int stage = 0; stage <= 3; ++stage) {
      EngineConfig c = Config(stage, l.dp, threads);
      c.mutable_parallel()->set_tp(l.tp);
      c.mutable_parallel()->set_pp(l.pp);
      c.mutable_parallel()->set_sequence_parallel(l.tp > 1);
      c.mutable_parallel()->set_pipeline_schedule(ParallelConfig::ONE_F_ONE_B);
      auto model = BuildGpt2(mc);
      Check(model.status(), "BuildGpt2");
      std::vector<int64_t> local;
      std::vector<std::string> names;
      for (const auto& unit : (*model)->units) {
        local.push_back(TpLocalElements(*unit, l.tp));
        names.push_back(unit->name());
      }
      auto engine = Engine::Create(c, &grid, std::move(model).value());
      Check(engine.status(), "Engine::Create");
      Check((*engine)->TrainStep(views).status(), "TrainStep");
      const StepPlan& plan = (*engine)->plan();
      const MemoryTracker& m = (*engine)->memory();
      RankState mine{grid.pp_rank(), 0, 0, 0, 0,
                     m.Usage(MemoryCategory::kParams).current, m.Usage(MemoryCategory::kGrads).current,
                     m.Usage(MemoryCategory::kMasterParams).current, m.Usage(MemoryCategory::kOptimizerState).current};
      for (size_t u = 0; u < plan.units.size(); ++u) {
        if (!plan.units[u].held) continue;
        mine.held_mask |= int64_t{1} << u;
        if (plan.units[u].mirror) {
          mine.mirror_mask |= int64_t{1} << u;
          mine.psi_mirror += local[u];
        } else {
          mine.psi_held += local[u];
        }
      }
      // Gathered as raw 32-bit words: the counts exceed what a float carries exactly.
      std::vector<RankState> all(grid.world().size());
      constexpr int kWords = sizeof(RankState) / sizeof(int32_t);
      Check(grid.world().AllGather(&mine, all.data(), kWords, DType::kI32)->Wait(), "AllGather");
      if (!root) continue;
      for (int s = 0; s < l.pp; ++s) {
        const RankState* first = nullptr;
        double worst = 1;
        for (const RankState& r : all) {
          if (r.pp_rank != s) continue;
          if (first == nullptr) first = &r;
          const double ratio = r.total() / r.Theory(stage, l.dp);
          if (std::abs(ratio - 1) > std::abs(worst - 1)) worst = ratio;
        }
        const double theory = first->Theory(stage, l.dp);
        std::printf("| %d, %d, %d | %d | %d | %s | %lld | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %.1f MB |"
                    " %.6f |\n",
                    l.dp, l.tp, l.pp, stage, s, HeldUnits(names, first->held_mask, first->mirror_mask).c_str(),
                    static_cast<long long>(first->psi_held + first->psi_mirror), first->params / 1e6,
                    first->grads / 1e6, first->master / 1e6, first->optim / 1e6, first->total() / 1e6, theory / 1e6, worst);
      }
    }
  }
}

// The stage's collectives alone (no compute): what compute could hide.
double CommOnlySeconds(const Engine& engine, Communicator& dp, int stage) {
  std::vector<std::vector<float>> full, shard;
  for (int u = 0; u < engine.num_units(); ++u) {
    full.emplace_back(engine.layout(u).padded_numel());
    shard.emplace_back(engine.layout(u).shard_numel());
  }
  Check(dp.Barrier()->Wait(), "Barrier");
  const Clock::time_point t0 = Clock::now();
  // Stage 3 gathers again for backward, all but the head's needs (held
  // across the turnaround).
  const std::vector<int>& held = engine.plan().units.back().needs;
  const int gathers = stage == 3 ? 2 : 1;
  for (int g = 0; g < gathers; ++g) {
    for (int u = 0; u < engine.num_units(); ++u) {
      if (g == 1 && std::find(held.begin(), held.end(), u) != held.end()) continue;
      Check(dp.AllGather(shard[u].data(), full[u].data(), shard[u].size(), DType::kF32)->Wait(), "AllGather");
    }
  }
  for (int u = engine.num_units() - 1; u >= 0; --u) {
    Check(dp.ReduceScatter(full[u].data(), shard[u].data(), shard[u].size(), DType::kF32, ReduceOp::kAvg)->Wait(),
          "ReduceScatter");
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A barrier that sleeps while it waits: the ranks idle during dp rank 0's
// one-rank steps must not spin on the cores it computes on.
void SleepingBarrier() {
  MPI_Request request;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  for (int done = 0; MPI_Test(&request, &done, MPI_STATUS_IGNORE), !done;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// One rank's training of the same per-rank micro-batch with the same
// threads: an engine on a one-rank grid (MPI_COMM_SELF), the reference the
// dp steps are compared with.
struct OneRankReference {
  std::unique_ptr<ProcessGrid> grid;
  std::unique_ptr<Engine> engine;
};
OneRankReference MakeOneRankReference(const Gpt2Config& mc, int threads) {
  CommOptions options;
  options.timeout = absl::Minutes(10);
  auto self = CreateMpiCommunicator(MPI_COMM_SELF, "self", options);
  Check(self.status(), "CreateMpiCommunicator(MPI_COMM_SELF)");
  auto grid = ProcessGrid::Create(std::move(self).value(), {1, 1, 1});
  Check(grid.status(), "ProcessGrid::Create (one rank)");
  OneRankReference r;
  r.grid = std::make_unique<ProcessGrid>(std::move(grid).value());
  auto engine = Engine::Create(Config(0, 1, threads), r.grid.get(), std::move(BuildGpt2(mc)).value());
  Check(engine.status(), "Engine::Create (one rank)");
  r.engine = std::move(engine).value();
  return r;
}

void StepTime(ProcessGrid& grid, int threads) {
  const int n = grid.dp().size();
  const bool root = grid.dp_rank() == 0;
  Gpt2Config mc;
  mc.n_layer = absl::GetFlag(FLAGS_time_layers);
  mc.n_embd = absl::GetFlag(FLAGS_time_embd);
  mc.n_head = 8;
  mc.vocab_size = absl::GetFlag(FLAGS_time_vocab);
  mc.seq_len = absl::GetFlag(FLAGS_time_seq);
  const int B = absl::GetFlag(FLAGS_time_batch);
  const std::vector<int32_t> tokens = RandomTokens(2, B * n, mc.seq_len, mc.vocab_size);
  std::vector<HostBatch> batches = MicroBatchesForRank(tokens, B * n, mc.seq_len, n, 1, grid.dp_rank());
  const std::vector<Batch> views = Views(batches);
  std::vector<std::unique_ptr<Engine>> engines;
  for (int stage = 0; stage <= 3; ++stage) {
    auto engine = Engine::Create(Config(stage, n, threads), &grid, std::move(BuildGpt2(mc)).value());
    Check(engine.status(), "Engine::Create");
    Check((*engine)->TrainStep(views).status(), "warm-up TrainStep");
    engines.push_back(std::move(engine).value());
  }
  OneRankReference one_rank;
  if (root) {
    one_rank = MakeOneRankReference(mc, threads);
    Check(one_rank.engine->TrainStep(views).status(), "warm-up TrainStep (one rank)");
  }
  SleepingBarrier();
  const int repeats = absl::GetFlag(FLAGS_repeats);
  std::vector<std::vector<double>> total(4), exposed(4), comm_only(4);
  std::vector<double> one_rank_total;
  for (int rep = 0; rep < repeats; ++rep) {
    for (int stage = 0; stage <= 3; ++stage) {
      absl::StatusOr<StepResult> r = engines[stage]->TrainStep(views);
      Check(r.status(), "TrainStep");
      total[stage].push_back(r->timings.total);
      exposed[stage].push_back(r->timings.gather_wait + r->timings.reduce_wait + r->timings.publish_wait);
      comm_only[stage].push_back(CommOnlySeconds(*engines[stage], grid.dp(), stage));
    }
    if (root) {
      absl::StatusOr<StepResult> r = one_rank.engine->TrainStep(views);
      Check(r.status(), "TrainStep (one rank)");
      one_rank_total.push_back(r->timings.total);
    }
    SleepingBarrier();
  }
  if (root) {
    std::printf("\n## Step time, GPT-2 %d layers C=%d V=%d T=%d, %d sequences per rank, dp = %d, %d threads per rank,"
                " median of %d interleaved steps\n\n",
                mc.n_layer, mc.n_embd, mc.vocab_size, mc.seq_len, B, n, threads, repeats);
    const double one = Median(one_rank_total);
    std::printf("One rank: the same per-rank micro-batch on a one-rank engine (ZeRO 0, %d threads) while the other "
                "ranks sleep, %.1f ms.\n\n",
                threads, one * 1e3);
    std::printf("| stage | step time | vs stage 0 | vs one rank | comm alone | comm exposed (waits) | comm hidden |\n"
                "|---|---|---|---|---|---|---|\n");
    const double base = Median(total[0]);
    for (int stage = 0; stage <= 3; ++stage) {
      const double t = Median(total[stage]), alone = Median(comm_only[stage]), exp = Median(exposed[stage]);
      const double hidden = alone > 0 ? std::max(0.0, std::min(1.0, 1.0 - exp / alone)) : 0.0;
      std::printf("| %d | %.1f ms | %.3f | %.3f | %.1f ms | %.1f ms | %.0f%% |\n", stage, t * 1e3, t / base, t / one,
                  alone * 1e3, exp * 1e3, hidden * 100);
    }
  }
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  zeroshard::ProcessGrid* grid = zeroshard::MakeGrid();
  const int threads = zeroshard::kernels::DefaultCpuThreads();
  zeroshard::kernels::SetCpuThreads(threads);
  if (absl::GetFlag(FLAGS_memory)) zeroshard::MemoryAndComm(*grid, threads);
  if (absl::GetFlag(FLAGS_precision_memory)) zeroshard::PrecisionMemory(*grid, threads);
  if (absl::GetFlag(FLAGS_time)) zeroshard::StepTime(*grid, threads);
  if (absl::GetFlag(FLAGS_grid_memory)) zeroshard::GridMemory(grid->world().rank(), grid->world().size(), threads);
  std::fflush(stdout);
  delete grid;
  zeroshard::FinalizeMpi();
  return 0;
}
