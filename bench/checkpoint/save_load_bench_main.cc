// Times SaveCheckpoint and LoadCheckpoint (same dp and resharded) of a GPT-2
// under mpirun, and rank 0's verify and consolidate, and checks the reload is
// bitwise. Prints one line per operation with bytes and MB/s.
//   mpirun -np N save_load_bench_main DIR [n_layer n_embd vocab]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/consolidate.h"
#include "checkpoint/engine_checkpoint.h"
#include "checkpoint/verify.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_env.h"
#include "comm/process_grid.h"
#include "core/file_io.h"
#include "engine/engine.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_registration.h"

namespace zeroshard {
namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: save_load_bench_main DIR [n_layer n_embd vocab]\n");
    return 2;
  }
  const std::string dir = argv[1];
  Gpt2Config gc;
  gc.n_layer = argc > 2 ? std::atoi(argv[2]) : 4;
  gc.n_embd = argc > 3 ? std::atoi(argv[3]) : 256;
  gc.vocab_size = argc > 4 ? std::atoi(argv[4]) : 8192;
  gc.n_head = 4;
  gc.seq_len = 128;
  auto world = CreateMpiWorld(CommOptions());
  if (!world.ok()) return 1;
  const int n = (*world)->size();
  auto grid = ProcessGrid::Create(std::move(world).value(), {n, 1, 1});
  if (!grid.ok()) return 1;
  const int rank = grid->dp_rank();
  TrainConfig config;
  config.mutable_engine()->mutable_zero()->set_stage(3);
  config.mutable_engine()->mutable_parallel()->set_dp(n);
  config.mutable_engine()->mutable_device()->set_threads_per_rank(1);
  auto make = [&]() { return Engine::Create(config.engine(), &grid.value(), std::move(BuildGpt2(gc)).value()); };
  auto saver = make();
  if (!saver.ok()) return 1;
  int64_t params = 0;
  params = (*saver)->model().num_params();
  const double bytes = 3.0 * 4.0 * static_cast<double>(params);  // master + m + v
  if (rank == 0) {
    RemoveTree(dir).IgnoreError();
    std::printf("GPT-2 n_layer=%d n_embd=%d vocab=%d: %lld parameters, %d ranks, %.1f MB of state\n", gc.n_layer,
                gc.n_embd, gc.vocab_size, static_cast<long long>(params), n, bytes / 1e6);
  }
  auto t0 = std::chrono::steady_clock::now();
  absl::Status s = SaveCheckpoint(**saver, dir, 1, Gpt2RunRecord(config), {});
  const double save_s = Seconds(t0);
  if (!s.ok()) {
    std::fprintf(stderr, "save: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  auto loader = make();
  t0 = std::chrono::steady_clock::now();
  absl::StatusOr<LoadedCheckpoint> l = LoadCheckpoint(**loader, dir);
  const double load_s = Seconds(t0);
  if (!l.ok()) return 1;
  bool same = true;
  for (const std::string& name : (*saver)->ParamNames()) {
    auto a = (*saver)->GatherParam(name), b = (*loader)->GatherParam(name);
    same &= a.ok() && b.ok() && std::memcmp(a->data(), b->data(), a->size() * 4) == 0;
  }
  if (rank == 0) {
    std::printf("save (fsync, commit)     %8.3f s  %8.1f MB/s\n", save_s, bytes / 1e6 / save_s);
    std::printf("load (same dp, checked)  %8.3f s  %8.1f MB/s  weights bitwise equal: %s\n", load_s,
                bytes / 1e6 / load_s, same ? "yes" : "NO");
    t0 = std::chrono::steady_clock::now();
    const bool ok = VerifyCheckpoint(dir).empty();
    const double verify_s = Seconds(t0);
    std::printf("verify (rank 0 alone)    %8.3f s  %8.1f MB/s  %s\n", verify_s, bytes / 1e6 / verify_s,
                ok ? "intact" : "CORRUPT");
    auto reader = CheckpointReader::Open(dir);
    t0 = std::chrono::steady_clock::now();
    s = ConsolidateCheckpoint(*reader, dir + "/full.safetensors", {});
    const double cons_s = Seconds(t0);
    std::printf("consolidate f32 (rank 0) %8.3f s  %8.1f MB/s of weights\n", cons_s, bytes / 3 / 1e6 / cons_s);
  }
  return same && s.ok() ? 0 : 1;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  const int rc = zeroshard::Main(argc, argv);
  zeroshard::FinalizeMpi();
  return rc;
}
