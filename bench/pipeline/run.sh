#!/usr/bin/env bash
# Builds and runs the pipeline benchmark with one rank per stage and prints
# markdown tables. Usage: bench/pipeline/run.sh [P ...] [-- pipeline_bench flags]
# (default P = 2; give 4 on a machine with 4 cores or more). BAZEL_ROOT and
# BAZEL_FLAGS: bench/common/build_bench.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
sizes=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do sizes+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#sizes[@]} -eq 0 ] && sizes=(2)
. bench/common/build_bench.sh
build_bench //bench/pipeline:pipeline_bench
bin=$bench_bin
. bazel/mpirun_local.sh
for np in "${sizes[@]}"; do
  mpirun "${mpirun_flags[@]}" -np "$np" "$bin" "$@"
done
