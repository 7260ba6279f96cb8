// What an engine.checkpoint.async_save costs the step loop: a GPT-2
// 124M-shaped model (4 layers, C 768, vocabulary 50257) under mpirun, saving
// every `interval` steps of `steps`, run three ways on one engine in one
// process — no saves, synchronous SaveCheckpoint, AsyncCheckpointer — with
// the trainer's boundary (one i32 all-reduce per step, which also carries
// "my write is still running") in all three. Prints a markdown table of
// rank 0's mean step time (train step + boundary + save work) and its ratio
// to no saves, medians over repeats, and the async save's parts.
//   mpirun -np 2 async_save_bench_main DIR [steps interval repeats n_layer]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/common/bench_util.h"
#include "checkpoint/async_checkpoint.h"
#include "checkpoint/engine_checkpoint.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_env.h"
#include "comm/process_grid.h"
#include "core/file_io.h"
#include "engine/engine.h"
#include "engine/testing/global_batch.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_registration.h"

namespace zeroshard {
namespace {

using bench::CheckOrExit;
using bench::Median;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double CpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

enum class Mode { kNone, kSync, kAsync };
const char* Name(Mode m) { return m == Mode::kNone ? "no saves" : m == Mode::kSync ? "synchronous" : "async_save"; }

struct RunTimes {
  double mean_step_s = 0;   // steps 1..N: train step + boundary + save work
  double drain_s = 0;       // async: waiting for and committing the last save after the loop
  double cpu_s = 0;         // this process's CPU time over the run (writer thread included)
  double snapshot_s = 0;    // async: Begin (directory, copy), summed
  double commit_s = 0;      // async: Finish at boundaries, summed
};

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: async_save_bench_main DIR [steps interval repeats n_layer]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int steps = argc > 2 ? std::atoi(argv[2]) : 30;
  const int interval = argc > 3 ? std::atoi(argv[3]) : 10;
  const int repeats = argc > 4 ? std::atoi(argv[4]) : 1;
  Gpt2Config gc;
  gc.n_layer = argc > 5 ? std::atoi(argv[5]) : 4;
  gc.n_embd = 768;
  gc.n_head = 12;
  gc.vocab_size = 50257;
  gc.seq_len = 64;
  const int rows = 2;  // per rank
  auto world = CreateMpiWorld(CommOptions());
  CheckOrExit(world.status(), "MPI");
  const int n = (*world)->size();
  auto grid = ProcessGrid::Create(std::move(world).value(), {n, 1, 1});
  CheckOrExit(grid.status(), "grid");
  const int rank = grid->dp_rank();
  TrainConfig config;
  EngineConfig& e = *config.mutable_engine();
  e.mutable_zero()->set_stage(2);
  e.mutable_parallel()->set_dp(n);
  e.mutable_device()->set_threads_per_rank(1);
  e.mutable_optimizer()->set_lr(1e-4);
  e.mutable_lr_schedule()->set_type(LrScheduleConfig::CONSTANT);
  e.mutable_checkpoint()->set_dir(dir);
  e.mutable_checkpoint()->set_interval(interval);
  e.mutable_checkpoint()->set_keep_last(1);
  e.mutable_checkpoint()->set_async_save(true);
  auto engine = Engine::Create(e, &grid.value(), BuildGpt2(gc).value());
  CheckOrExit(engine.status(), "engine");
  Communicator& control = grid->world_control();
  const CheckpointRunConfig run = Gpt2RunRecord(config);
  const std::vector<HostBatch> batches =
      MicroBatchesForRank(RandomTokens(3, rows * n, gc.seq_len, gc.vocab_size), rows * n, gc.seq_len, n, 1, rank);
  if (rank == 0) RemoveTree(dir).IgnoreError();
  CheckOrExit((*engine)->TrainStep(Views(batches)).status(), "warm-up step");

  const SaveOptions options = SaveOptionsFromConfig(e);
  int64_t saved_step = 0;  // distinct steps across runs, so no save replaces another
  const auto run_once = [&](Mode mode) {
    RunTimes t;
    AsyncCheckpointer async(options);
    int32_t sync_word = 0;
    CheckOrExit(control.AllReduce(&sync_word, 1, DType::kI32, ReduceOp::kSum)->Wait(), "barrier");
    const double cpu0 = CpuSeconds();
    double total = 0;
    for (int s = 1; s <= steps; ++s) {
      const auto t0 = Clock::now();
      CheckOrExit((*engine)->TrainStep(Views(batches)).status(), "step");
      int32_t writing = async.in_flight() && !async.written() ? 1 : 0;
      CheckOrExit(control.AllReduce(&writing, 1, DType::kI32, ReduceOp::kSum)->Wait(), "boundary");
      if (async.in_flight() && writing == 0) {
        const auto c0 = Clock::now();
        CheckOrExit(async.Finish(**engine).status(), "commit");
        t.commit_s += Since(c0);
      }
      if (mode != Mode::kNone && s % interval == 0) {
        const int64_t step = ++saved_step;
        if (mode == Mode::kSync) {
          CheckOrExit(SaveCheckpoint(**engine, dir, step, run, {}, options), "save");
        } else {
          if (async.in_flight()) {
            const auto c0 = Clock::now();
            CheckOrExit(async.Finish(**engine).status(), "commit");
            t.commit_s += Since(c0);
          }
          const auto b0 = Clock::now();
          CheckOrExit(async.Begin(**engine, dir, step, run, {}), "snapshot");
          t.snapshot_s += Since(b0);
        }
      }
      total += Since(t0);
    }
    const auto d0 = Clock::now();
    if (async.in_flight()) CheckOrExit(async.Finish(**engine).status(), "drain");
    t.drain_s = Since(d0);
    t.cpu_s = CpuSeconds() - cpu0;
    t.mean_step_s = total / steps;
    return t;
  };

  std::vector<std::vector<RunTimes>> times(3);
  for (int r = 0; r < repeats; ++r) {
    for (Mode m : {Mode::kNone, Mode::kSync, Mode::kAsync}) times[static_cast<int>(m)].push_back(run_once(m));
  }
  if (rank == 0) {
    const auto med = [&](int m, double RunTimes::*f) {
      std::vector<double> v;
      for (const RunTimes& t : times[m]) v.push_back(t.*f);
      return Median(v);
    };
    const int64_t params = (*engine)->model().num_params();
    std::printf("GPT-2 n_layer %d n_embd %d vocab %d (%lld parameters), dp %d, ZeRO 2, %d x %d tokens per rank, "
                "%d steps, a save every %d, %d repeat(s); %.1f MB of checkpoint per rank\n\n",
                gc.n_layer, gc.n_embd, gc.vocab_size, static_cast<long long>(params), n, rows, gc.seq_len, steps,
                interval, repeats, 12.0 * params / n / 1e6);
    // A mode's ratio is taken within each repeat (the modes run back to back)
    // and the median over repeats reported: the machine's drift between
    // repeats cancels.
    const auto ratio = [&](int m) {
      std::vector<double> v;
      for (int r = 0; r < repeats; ++r) v.push_back(times[m][r].mean_step_s / times[0][r].mean_step_s);
      return Median(v);
    };
    std::printf("| saves | mean step (s) | x no saves (median of per-repeat ratios) | drain after the loop (s) | "
                "CPU s of rank 0 |\n");
    std::printf("|---|---|---|---|---|\n");
    for (int m = 0; m < 3; ++m) {
      std::printf("| %s | %.3f | %.3f | %.2f | %.1f |\n", Name(static_cast<Mode>(m)), med(m, &RunTimes::mean_step_s),
                  ratio(m), med(m, &RunTimes::drain_s), med(m, &RunTimes::cpu_s));
    }
    std::printf("\nasync_save's own time on the step loop per run: snapshots %.3f s, commits %.3f s (medians)\n",
                med(2, &RunTimes::snapshot_s), med(2, &RunTimes::commit_s));
    std::printf("per-repeat ratios async/none:");
    for (int r = 0; r < repeats; ++r) std::printf(" %.3f", times[2][r].mean_step_s / times[0][r].mean_step_s);
    std::printf("; sync/none:");
    for (int r = 0; r < repeats; ++r) std::printf(" %.3f", times[1][r].mean_step_s / times[0][r].mean_step_s);
    std::printf("\n");
    RemoveTree(dir).IgnoreError();
  }
  return 0;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  const int rc = zeroshard::Main(argc, argv);
  zeroshard::FinalizeMpi();
  return rc;
}
