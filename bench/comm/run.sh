#!/usr/bin/env bash
# Builds comm_bench_main and prints the comm-bench tables for each world size.
# Usage: bench/comm/run.sh [NP...] [-- COMM_BENCH_FLAGS...]
#   bench/comm/run.sh 2 4 -- --min-bytes=1048576 --max-bytes=16777216 --factor=2 --iters=60
# Environment: BAZEL_OUTPUT_ROOT picks a Bazel output root (default: Bazel's own).
set -euo pipefail
cd "$(dirname "$0")/../.."
nps=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do nps+=("$1"); shift; done
[ $# -gt 0 ] && shift
[ ${#nps[@]} -gt 0 ] || nps=(2 4)
bazel_cmd=(bazel)
if [ -n "${BAZEL_OUTPUT_ROOT:-}" ]; then bazel_cmd+=(--output_user_root="$BAZEL_OUTPUT_ROOT"); fi
"${bazel_cmd[@]}" build --symlink_prefix=/ //cli:comm_bench_main >&2
bin=$("${bazel_cmd[@]}" info bazel-bin 2>/dev/null)/cli/comm_bench_main
. bazel/mpirun_local.sh
echo "# $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
for np in "${nps[@]}"; do
  echo "## mpirun -np $np comm_bench_main $*"
  mpirun "${mpirun_flags[@]}" -np "$np" "$bin" "$@"
  echo
done
