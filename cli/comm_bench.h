// `zeroshard comm-bench`: nccl-tests style tables for the Communicator layer,
// each row beside the same collective called directly on the raw MPI (or
// NCCL) API, so the layer's overhead is visible. Run under mpirun.
//
// Sizes follow nccl-tests: `size` is the bytes of the whole buffer (the
// all-gather output, the reduce-scatter input, the all-reduce/broadcast
// buffer), rounded down to a multiple of (group size × element size).
// algbw = size / time; busbw = algbw × 2(n-1)/n (all_reduce), (n-1)/n
// (all_gather, reduce_scatter), 1 (broadcast). Time is the median over
// iterations of the slowest rank's time for that iteration; every iteration
// starts after a barrier, and ours/raw iterations alternate so drift in the
// machine's load hits both alike. A second ratio compares the fastest
// iterations: on a shared, oversubscribed host the medians of large messages
// swing with preemption, while the minima show the layer's own cost.
#ifndef ZEROSHARD_CLI_COMM_BENCH_H_
#define ZEROSHARD_CLI_COMM_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/subcommand.h"
#include "comm/process_grid.h"
#include "core/dtype.h"

namespace zeroshard::cli {

enum class BenchOp { kAllReduce, kAllGather, kReduceScatter, kBroadcast };
const char* BenchOpName(BenchOp op);  // "all_reduce", ...

struct CommBenchOptions {
  std::string backend = "mpi";  // mpi | nccl
  std::vector<BenchOp> ops = {BenchOp::kAllReduce, BenchOp::kAllGather, BenchOp::kReduceScatter,
                              BenchOp::kBroadcast};
  int64_t min_bytes = 1024;
  int64_t max_bytes = 16 << 20;
  int factor = 4;  // size multiplier from one row to the next
  int iters = 20;
  int warmup = 5;
  DType dtype = DType::kF32;
  std::string group = "world";  // world | dp | tp | pp
  GridShape shape{0, 1, 1};     // dp == 0: world size / (tp · pp)
};

// Parses argv[1..argc) (argv[0] is the subcommand name). kInvalidArgument
// names the flag and the offending text.
absl::StatusOr<CommBenchOptions> ParseCommBenchArgs(int argc, char** argv);

// busbw / algbw for `op` in a group of n ranks.
double BusBandwidthFactor(BenchOp op, int n);

// The buffer sizes (bytes) of the rows: min, min·factor, ... up to max, each
// rounded down to a multiple of group_size · element bytes; empty rows dropped.
std::vector<int64_t> BenchSizes(const CommBenchOptions& options, int group_size);

// The subcommand entry point: 0 on success, 2 on bad usage, 1 when a
// communicator fails. Initialises and finalises MPI.
int RunCommBench(int argc, char** argv);

extern const Subcommand kCommBench;

}  // namespace zeroshard::cli

#endif  // ZEROSHARD_CLI_COMM_BENCH_H_
