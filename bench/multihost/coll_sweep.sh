#!/usr/bin/env bash
# Open MPI's coll_tuned algorithm choices for reduce_scatter_block (what
# MPI_Reduce_scatter_block, zeroshard's ReduceScatter, calls) and allreduce
# between two namespace hosts (tools/cluster, 1 rank each) at SIZE bytes:
# one comm-bench run per choice, busbw against the shaped rate. Prints a
# markdown table. Root with CAP_NET_ADMIN.
# Usage: bench/multihost/coll_sweep.sh [--link 1gbit] [--bytes 16777216] [--iters 6]
set -euo pipefail
cd "$(dirname "$0")/../.."
link=1gbit bytes=16777216 iters=6
while [ $# -gt 0 ]; do
  case $1 in
    --link) link=$2; shift 2 ;;
    --bytes) bytes=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    *) echo "usage: $0 [--link RATE] [--bytes B] [--iters N]" >&2; exit 2 ;;
  esac
done
. bench/common/build_bench.sh
build_bench //cli:comm_bench_main
comm_bench=$bench_bin_dir/cli/comm_bench_main
trap 'tools/cluster down >/dev/null 2>&1 || true' EXIT
rate_bps=$(python3 -c '
import re, sys
m = re.fullmatch(r"([0-9.]+)([kmg]?)bit", sys.argv[1])
print(int(float(m[1]) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m[2]] / 8))' "$link")
tools/cluster down >/dev/null
tools/cluster up --hosts 2 --slots 1 --link "$link" >/dev/null
echo "load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ), link $link, $bytes bytes"
echo
echo "| op | coll_tuned algorithm | zeroshard busbw (GB/s) | raw MPI busbw (GB/s) | zeroshard / shaped rate |"
echo "|---|---|---|---|---|"
run() {  # run OP PARAM VALUE NAME
  local op=$1 param=$2 value=$3 name=$4 env=()
  if [ "$value" != default ]; then
    env=(OMPI_MCA_coll_tuned_use_dynamic_rules=1 "OMPI_MCA_$param=$value")
  fi
  env "${env[@]}" tools/cluster run --np 2 -- "$comm_bench" --ops "$op" --min-bytes "$bytes" --max-bytes "$bytes" \
    --iters "$iters" --warmup 1 |
    awk -v rate="$rate_bps" -v op="$op" -v name="$name" '
      /^ +[0-9]+ +[0-9]+ \|/ { printf "| %s | %s | %.3f | %.3f | %.0f %% |\n", op, name, $6, $10, 100 * $6 * 1e9 / rate }'
}
run reduce_scatter coll_tuned_reduce_scatter_block_algorithm default "default (fixed rules)"
for a in 1:basic_linear 2:recursive_doubling 3:recursive_halving 4:butterfly; do
  run reduce_scatter coll_tuned_reduce_scatter_block_algorithm "${a%%:*}" "${a#*:}"
done
run all_reduce coll_tuned_allreduce_algorithm default "default (fixed rules)"
for a in 2:nonoverlapping 3:recursive_doubling 4:ring 5:segmented_ring 6:rabenseifner; do
  run all_reduce coll_tuned_allreduce_algorithm "${a%%:*}" "${a#*:}"
done
