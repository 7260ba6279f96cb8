// A pipeline stage that stops mid-step: 4 ranks, pp 4, tiny GPT-2, short
// comm timeout. Step 1 runs; in step 2 the last stage stops (SIGSTOP)
// before its first backward, so stage 2 waits for a gradient that never
// comes. The watchdog must end the job naming the pipeline receive and the
// rank it waits on (pipeline_fault_test.sh checks the message and the time).
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "comm/mpi_env.h"
#include "comm/process_grid.h"
#include "engine/engine.h"
#include "engine/testing/function_observer.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/tiny_gpt2.h"
#include "models/gpt2/gpt2.h"

namespace zeroshard {
namespace {

int Run(int timeout_s) {
  CommOptions options;
  options.timeout = absl::Seconds(timeout_s);
  auto world = CreateMpiWorld(options);
  if (!world.ok()) {
    std::fprintf(stderr, "pipeline_fault_driver: %s\n", std::string(world.status().message()).c_str());
    return 2;
  }
  const int n = (*world)->size();
  auto grid = ProcessGrid::Create(std::move(world).value(), {1, 1, n});
  if (!grid.ok()) return 2;
  EngineConfig c;
  c.set_gradient_accumulation_steps(n);
  c.mutable_parallel()->set_pp(n);
  c.mutable_device()->set_threads_per_rank(1);
  const Gpt2Config model = TinyGpt2(2 * n);
  FunctionObserver stall;  // before the engine: it outlives it
  auto engine = Engine::Create(c, &*grid, std::move(BuildGpt2(model)).value());
  if (!engine.ok()) {
    std::fprintf(stderr, "pipeline_fault_driver: %s\n", std::string(engine.status().message()).c_str());
    return 2;
  }
  const bool last = grid->pp_rank() == n - 1;
  stall.action_start = [&](const ActionEvent& a) {
    if (!last || a.attempt != 1 || a.action->kind != ActionKind::kBackward) return;
    std::fflush(stderr);
    raise(SIGSTOP);  // mpirun's kill ends it
  };
  (*engine)->AddObserver(&stall);
  const int rows = 2 * n;
  std::vector<HostBatch> batches =
      MicroBatchesForRank(RandomTokens(3, rows, model.seq_len, model.vocab_size), rows, model.seq_len, 1, n, 0);
  for (int step = 0; step < 2; ++step) {
    if (step == 1 && grid->world().rank() == 0) {
      const long long now = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
      std::printf("fault_begin_ms=%lld\n", now);
      std::fflush(stdout);
    }
    absl::StatusOr<StepResult> r = (*engine)->TrainStep(Views(batches));
    std::fprintf(stderr, "[rank %d] step %d: %s\n", grid->world().rank(), step + 1,
                 r.ok() ? "OK" : std::string(r.status().message()).c_str());
    if (!r.ok()) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s TIMEOUT_SECONDS\n", argv[0]);
    return 2;
  }
  const int code = zeroshard::Run(std::atoi(argv[1]));
  zeroshard::FinalizeMpi();
  return code;
}
