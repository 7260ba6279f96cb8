// A job that breaks the collective contract on purpose, for
// comm_fault_test.sh. Usage (under mpirun, 2+ ranks):
//   comm_fault_driver mismatch|timeout|timeout_unchecked|timeout_silent TIMEOUT_SECONDS
// mismatch: rank 1 calls AllGather(f32, 1024) where the others call
//   ReduceScatter(f32, 4096); every rank prints its status and exits 1.
// timeout: the last rank sleeps 5 × the timeout before an AllReduce the
//   others are waiting in; the watchdog must abort the job naming it
//   (timeout_unchecked: the same without debug_checks, so the watchdog asks
//   the ranks what they started; the sleeping rank's listener still answers).
// timeout_silent: without debug_checks, the last rank stops its whole
//   process (SIGSTOP) instead: it cannot answer, and must be named as such.
// Rank 0 prints "fault_begin_ms=<unix ms>" just before the faulty step.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "comm/mpi_communicator.h"

namespace zeroshard {
namespace {

int64_t UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int Run(const std::string& mode, int timeout_s) {
  CommOptions options;
  options.debug_checks = mode == "mismatch" || mode == "timeout";
  options.timeout = absl::Seconds(timeout_s);
  auto world_or = CreateMpiWorld(options);
  if (!world_or.ok()) {
    std::fprintf(stderr, "comm_fault_driver: %s\n", std::string(world_or.status().message()).c_str());
    return 2;
  }
  std::unique_ptr<Communicator> world = std::move(world_or).value();
  const int rank = world->rank();
  const int n = world->size();
  std::vector<float> in(4096 * n, 1.0f), out(4096 * n, 0.0f);
  absl::Status s = world->AllReduce(in.data(), 1024, DType::kF32, ReduceOp::kSum)->Wait();  // #1: fine
  if (!s.ok()) {
    std::fprintf(stderr, "[rank %d] unexpected: %s\n", rank, std::string(s.message()).c_str());
    return 2;
  }
  if (rank == 0) {
    std::printf("fault_begin_ms=%lld\n", static_cast<long long>(UnixMillis()));
    std::fflush(stdout);
  }
  if (mode == "mismatch") {
    s = rank == 1 ? world->AllGather(in.data(), out.data(), 1024, DType::kF32)->Wait()
                  : world->ReduceScatter(in.data(), out.data(), 4096, DType::kF32, ReduceOp::kSum)->Wait();
  } else {
    if (rank == n - 1 && mode == "timeout_silent") raise(SIGSTOP);  // mpirun's kill ends it
    if (rank == n - 1) std::this_thread::sleep_for(std::chrono::seconds(5 * timeout_s));
    s = world->AllReduce(in.data(), 1024, DType::kF32, ReduceOp::kSum)->Wait();
  }
  std::fprintf(stderr, "[rank %d] %s\n", rank, s.ok() ? "OK" : std::string(s.message()).c_str());
  world.reset();
  FinalizeMpi();
  return s.ok() ? 0 : 1;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s mismatch|timeout|timeout_unchecked|timeout_silent TIMEOUT_SECONDS\n", argv[0]);
    return 2;
  }
  return zeroshard::Run(argv[1], std::atoi(argv[2]));
}
