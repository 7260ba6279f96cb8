#!/usr/bin/env bash
# GEMM rate and the GPT-2 124M single-rank step under every OpenBLAS core type
# this CPU executes (tools/lib/openblas_cores.sh), as a markdown table:
# medians over REPEATS runs, the core types interleaved so a busy machine
# slows them alike. With --before DIR, DIR's gemm_bench and
# single_rank_step_bench (an older build) run beside this tree's, in the
# same rounds.
#   bench/kernels/core_types.sh [--repeats N] [--before DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/common/build_bench.sh
. tools/lib/openblas_cores.sh
repeats=3 before=""
while [ $# -gt 0 ]; do
  case "$1" in
    --repeats) repeats=$2; shift 2 ;;
    --before) before=$2; shift 2 ;;
    *) echo "usage: $0 [--repeats N] [--before DIR]" >&2; exit 2 ;;
  esac
done
build_bench //bench/kernels:gemm_bench //bench/single_rank:single_rank_step_bench
after="$bench_bin_dir/bench"
cores=$(openblas_runnable_cores)
[ -n "$cores" ] || { echo "core_types.sh: no x86-64 core types to select here" >&2; exit 1; }
builds=(after)
[ -z "$before" ] || builds=(before after)
raw=$(mktemp)
for r in $(seq "$repeats"); do
  for core in $cores; do
    for build in "${builds[@]}"; do
      if [ "$build" = before ]; then gemm="$before/gemm_bench" step="$before/single_rank_step_bench";
      else gemm="$after/kernels/gemm_bench" step="$after/single_rank/single_rank_step_bench"; fi
      rate=$(OPENBLAS_CORETYPE=$core "$gemm" --reps=5 | sed -nE 's/^step GEMMs: .* = ([0-9.]+) GFLOP\/s$/\1/p')
      ms=$(OPENBLAS_CORETYPE=$core "$step" --repeats=3 |
        sed -nE 's/^\| step: zero grads \+ forward\/backward \+ AdamW \| ([0-9.]+) ms \|$/\1/p')
      echo "$core $build $rate $ms" >>"$raw"
      echo "round $r: $core $build: GEMM $rate GFLOP/s, step $ms ms" >&2
    done
  done
done
python3 - "$raw" "$repeats" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(lambda: ([], []))
order = []
for line in open(sys.argv[1]):
    core, build, rate, ms = line.split()
    if core not in order:
        order.append(core)
    rows[(core, build)][0].append(float(rate))
    rows[(core, build)][1].append(float(ms))
builds = sorted({b for _, b in rows}, reverse=True)  # before, after
med = lambda v: statistics.median(v)
print(f"Medians of {sys.argv[2]} rounds; GEMM: the step's GEMM shapes (bench/kernels:gemm_bench), "
      "step: zero grads + forward/backward + AdamW (bench/single_rank:single_rank_step_bench), 124M, B4 x T64.\n")
head = "| core type |" + "".join(f" GEMM GFLOP/s {b} | step ms {b} |" for b in builds)
if len(builds) == 2:
    head += " GEMM after/before | step after/before |"
print(head)
print("|---" * (1 + 2 * len(builds) + (2 if len(builds) == 2 else 0)) + "|")
for core in order:
    cells = []
    for b in builds:
        rate, ms = rows[(core, b)]
        cells += [f"{med(rate):.1f}", f"{med(ms):.1f}"]
    if len(builds) == 2:
        (rb, mb), (ra, ma) = rows[(core, "before")], rows[(core, "after")]
        cells += [f"{med(ra) / med(rb):.3f}", f"{med(ma) / med(mb):.3f}"]
    print(f"| {core} | " + " | ".join(cells) + " |")
PY
rm -f "$raw"
