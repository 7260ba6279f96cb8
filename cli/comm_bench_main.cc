// Stand-alone `comm-bench` for testing without the full zeroshard binary:
// mpirun -np N comm_bench_main [FLAGS]  (same flags as zeroshard comm-bench).
#include "cli/comm_bench.h"

int main(int argc, char** argv) { return zeroshard::cli::RunCommBench(argc, argv); }
