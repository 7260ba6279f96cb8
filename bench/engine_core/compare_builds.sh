#!/usr/bin/env bash
# Two builds of the step benchmark and the pipeline benchmark, run in turn
# (old, new, old, new, ...) on this machine, with a table of medians and
# their new / old ratios: the check that a change to the engine's core made
# neither slower.
#
#   bench/engine_core/compare_builds.sh [--rounds N] OLD_DIR NEW_DIR
#
# Each DIR holds `single_rank_step_bench` and `pipeline_bench` (copies of
# bazel-bin/bench/single_rank/ and bazel-bin/bench/pipeline/ of the commit
# to compare). Rounds default to 3.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=3
if [ "${1:-}" = "--rounds" ]; then rounds=$2; shift 2; fi
[ $# -eq 2 ] || { echo "usage: $0 [--rounds N] OLD_DIR NEW_DIR" >&2; exit 2; }
old=$1 new=$2
. bazel/mpirun_local.sh
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq 1 "$rounds"); do
  for side in old new; do
    dir=$old; [ "$side" = new ] && dir=$new
    "$dir/single_rank_step_bench" --repeats 3 > "$out/step.$side.$r" 2>&1
    mpirun "${mpirun_flags[@]}" -np 2 "$dir/pipeline_bench" > "$out/pipe.$side.$r" 2>&1
  done
done
python3 - "$out" "$rounds" <<'PY'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def step_ms(path):
    for line in open(path):
        m = re.match(r"\| step: zero grads \+ forward/backward \+ AdamW \| ([0-9.]+) ms \|", line)
        if m: return float(m.group(1))
    raise SystemExit(f"{path}: no step row")
def pipe_ms(path):
    rows = {}
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0] in ("GPIPE", "ONE_F_ONE_B", "INTERLEAVED_1F1B", "ZERO_BUBBLE_H1") \
                and re.fullmatch(r"[0-9.]+", cells[3]) and (cells[0], cells[1], cells[2]) not in rows:
            rows[(cells[0], cells[1], cells[2])] = float(cells[3])
    return rows
print(f"Medians over {rounds} interleaved rounds (old, new, old, new, ...).\n")
print("| benchmark | old ms | new ms | new / old |")
print("|---|---|---|---|")
o = statistics.median(step_ms(f"{out}/step.old.{r}") for r in range(1, rounds + 1))
n = statistics.median(step_ms(f"{out}/step.new.{r}") for r in range(1, rounds + 1))
print(f"| single-rank 124M step (B4 x T64) | {o:.1f} | {n:.1f} | {n / o:.3f} |")
olds = [pipe_ms(f"{out}/pipe.old.{r}") for r in range(1, rounds + 1)]
news = [pipe_ms(f"{out}/pipe.new.{r}") for r in range(1, rounds + 1)]
for key in olds[0]:
    o = statistics.median(x[key] for x in olds)
    n = statistics.median(x[key] for x in news)
    print(f"| pipeline pp 2, {key[0]} v {key[1]} m {key[2]} | {o:.1f} | {n:.1f} | {n / o:.3f} |")
PY
