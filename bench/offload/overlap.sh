#!/usr/bin/env bash
# How much of the NVMe tier's I/O hides under compute, at GPT-2 124M shapes
# on one rank (examples/configs/gpt2_124m.pbtxt at dp 1, B4 x T64, AdamW,
# ZeRO-3), as a markdown table, side by side in one run:
#   a. the compute-only step: the same config with nothing offloaded;
#   b. the I/O-only time of the offloaded step's bytes: its bytes read and
#      written at the I/O component's own bandwidth (bench/offload/io_bench,
#      O_DIRECT, the slots' piece size as block, the configured queue depth);
#   c. the offloaded step (optimizer state and masters on NVMe), for each
#      --buffer_counts entry.
# The runs take turns (a, then c for each buffer count) --runs times, so
# that a busy machine slows them alike; each time is the median over every
# run's steps after --warmup. The target is c <= 1.15 x max(a, b). Writes
# the tables to stdout. --train and --io_bench use given binaries instead
# of building them; --before PATH also runs another train binary (e.g. of an
# earlier commit) in the same turns, as rows "before".
# Usage: bench/offload/overlap.sh [--dir DIR] [--steps N] [--warmup N]
#          [--buffer_counts 8,16,64] [--runs N] [--repeats N]
#          [--train PATH] [--io_bench PATH] [--before PATH] [--out FILE]
#          [--queue_depth N]
# The tables also go to --out (default bench/results/offload_overlap.md).
# Needs about 1.6 GB free in DIR (default /var/tmp) and 4 GiB of memory.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=/var/tmp
steps=7
warmup=2
counts=16,64
runs=2
repeats=3
train=
io_bench=
before=
out=bench/results/offload_overlap.md
# 24 MiB slots: each piece (the master and AdamW's two kinds) is 8 MiB.
buffer_bytes=$((24 << 20))
queue_depth=8
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --buffer_counts) counts=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --train) train=$2; shift 2 ;;
    --io_bench) io_bench=$2; shift 2 ;;
    --before) before=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --queue_depth) queue_depth=$2; shift 2 ;;
    *) echo "overlap.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
if [ -z "$train" ] || [ -z "$io_bench" ]; then
  . bench/common/build_bench.sh
  build_bench //bench/offload:io_bench //examples:train_gpt2
  [ -n "$io_bench" ] || io_bench=$bench_bin
  [ -n "$train" ] || train=$bench_bin_dir/examples/train_gpt2
fi
config=examples/configs/gpt2_124m.pbtxt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--config "$config" --steps "$steps" --set engine.parallel.dp=1 --set data.batch_size=4
  --set engine.checkpoint.dir= --set engine.logging.trace_path= --set eval_interval=0)

# run BINARY NAME [--set ...]: one training run, its metrics in $tmp/NAME.jsonl.
run() {
  local bin=$1 name=$2
  shift 2
  "$bin" "${common[@]}" --set engine.logging.metrics_path="$tmp/$name.jsonl" "$@" \
    >"$tmp/$name.out" 2>"$tmp/$name.err" || {
    cat "$tmp/$name.out" "$tmp/$name.err" >&2
    exit 1
  }
}

for r in $(seq "$runs"); do
  run "$train" "compute_$r"
  for k in ${counts//,/ }; do
    offload=(--set engine.offload.optimizer_state=NVME --set engine.offload.master_weights=NVME
      --set engine.offload.nvme_dir="$dir" --set engine.offload.buffer_count="$k"
      --set engine.offload.buffer_bytes="$buffer_bytes" --set engine.offload.queue_depth="$queue_depth")
    run "$train" "offload_${k}_$r" "${offload[@]}"
    if [ -n "$before" ]; then run "$before" "before_${k}_$r" "${offload[@]}"; fi
  done
done
"$io_bench" --dir "$dir" --file_mib 1024 --repeats "$repeats" --block_kib $((buffer_bytes / 3 / 1024)) \
  --depths "$queue_depth" --fio=false >"$tmp/io.md"

{
echo "# Offload overlap: GPT-2 124M shapes on one rank"
echo
echo "\`bench/offload/overlap.sh\` at $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u +%Y-%m-%d), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; dir $dir; $runs runs in turn of $steps steps, $warmup warm-up; ${buffer_bytes} bytes per slot, queue depth $queue_depth."
echo
python3 - "$tmp" "$warmup" "$counts" "$buffer_bytes" "$queue_depth" "$runs" "$before" <<'PY'
import json, re, statistics, sys
tmp, warmup, counts, buffer_bytes, qd = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), int(sys.argv[4]), sys.argv[5]
runs = int(sys.argv[6])
variants = [("", "offload")] + ([("before", "before")] if sys.argv[7] else [])

def steps(name):
    out = []
    for r in range(1, runs + 1):
        lines = [json.loads(l) for l in open(f"{tmp}/{name}_{r}.jsonl")]
        out += [l for l in lines if "step" in l and "step_ms" in l][warmup:]
    return out

def median(values):
    return statistics.median(values) if values else 0.0

io_md = open(f"{tmp}/io.md").read()
# The tables' "| block | qd D | raw ... |" rows: write first, then read.
bw = [float(m) for m in re.findall(r"^\| [0-9]+ MiB \| ([0-9.]+) \|", io_md, re.M)]
write_bw, read_bw = (bw + [0, 0])[:2]
compute = steps("compute")
a = median([s["step_ms"] for s in compute]) / 1000
print(f"I/O component alone (io_bench, {buffer_bytes // 3 >> 20} MiB blocks, queue depth {qd}): "
      f"write {write_bw:.2f} GB/s, read {read_bw:.2f} GB/s")
print()
print("| program | buffer_count | staging MiB | steps (all runs) | a: compute-only s | read GB | written GB | "
      "b: I/O-only s | c: offloaded s | c / max(a, b) | target |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for k in counts:
    for label, prefix in variants:
        off = steps(f"{prefix}_{k}")
        read = median([s["io"]["read_bytes"] for s in off])
        written = median([s["io"]["write_bytes"] for s in off])
        b = read / 1e9 / read_bw + written / 1e9 / write_bw if read_bw and write_bw else 0.0
        c = median([s["step_ms"] for s in off]) / 1000
        ratio = c / max(a, b) if max(a, b) > 0 else 0.0
        print(f"| {label or 'this'} | {k} | {int(k) * buffer_bytes >> 20} | {len(off)} | {a:.2f} | {read / 1e9:.2f} | "
              f"{written / 1e9:.2f} | {b:.2f} | {c:.2f} | {ratio:.2f} | "
              f"{'<= 1.15 ' + ('met' if ratio <= 1.15 else 'missed')} |")
print()
print("s/step of each step after warm-up, runs in turn:")
print()
print("compute-only: " + ", ".join(f"{s['step_ms'] / 1000:.2f}" for s in compute))
for k in counts:
    for label, prefix in variants:
        print(f"{label or 'this'} buffer_count {k}: " + ", ".join(f"{s['step_ms'] / 1000:.2f}" for s in steps(f"{prefix}_{k}")))
PY
} | tee "$out"
