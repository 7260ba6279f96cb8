#!/usr/bin/env bash
# Builds comm_bench_main and prints the comm-bench tables for each world size.
# Usage: bench/comm/run.sh [NP...] [-- COMM_BENCH_FLAGS...]
#   bench/comm/run.sh 2 4 -- --min-bytes=1048576 --max-bytes=16777216 --factor=2 --iters=60
# BAZEL_ROOT picks the Bazel output root (default: Bazel's own); BAZEL_FLAGS
# adds build flags.
set -euo pipefail
cd "$(dirname "$0")/../.."
nps=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do nps+=("$1"); shift; done
[ $# -gt 0 ] && shift
[ ${#nps[@]} -gt 0 ] || nps=(2 4)
. bench/common/build_bench.sh
build_bench //cli:comm_bench_main
bin=$bench_bin
. bazel/mpirun_local.sh
echo "# $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
for np in "${nps[@]}"; do
  echo "## mpirun -np $np comm_bench_main $*"
  mpirun "${mpirun_flags[@]}" -np "$np" "$bin" "$@"
  echo
done
