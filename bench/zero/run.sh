#!/usr/bin/env bash
# Builds and runs the ZeRO benchmark at dp = 1, 2, 4, then its (dp, tp, pp)
# model-state table on 4 and 8 ranks, and prints markdown tables.
# Usage: bench/zero/run.sh [extra zero_bench flags]
# BAZEL_ROOT picks the Bazel output root (default: Bazel's own); BAZEL_FLAGS
# adds build flags (e.g. --//bazel:cuda=false to skip nvcc).
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/common/build_bench.sh
build_bench //bench/zero:zero_bench
bin=$bench_bin
. bazel/mpirun_local.sh
for np in 1 2 4; do
  echo "# dp = $np"
  # Step time at dp = 2 only: RESULTS.md compares the stages there.
  time_flag=--time=false
  if [ "$np" = 2 ]; then time_flag=--time=true; fi
  mpirun "${mpirun_flags[@]}" -np "$np" "$bin" "$time_flag" "$@"
done
for np in 4 8; do
  echo "# dp x tp x pp = $np"
  mpirun "${mpirun_flags[@]}" -np "$np" "$bin" --memory=false --precision_memory=false --time=false --grid_memory "$@"
done
