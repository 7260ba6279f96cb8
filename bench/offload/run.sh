#!/usr/bin/env bash
# GPT-2 XL shapes on one rank with optimizer state and masters on the NVMe
# tier (examples/configs/gpt2_xl_offload.pbtxt), and the raw bandwidth of the
# same directory, as markdown tables:
#   1. the plan without offload, refused by check-config with the planner's message;
#   2. `--steps` steps with offload: s/step, bytes read and written per step,
#      bandwidth achieved against raw sequential O_DIRECT measured in this run,
#      peak RSS against the plan.
# Usage: bench/offload/run.sh [--dir DIR] [--steps N]
# Needs about 19 GB free in DIR (default /var/tmp) and 12 GiB of memory.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=/var/tmp
steps=3
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "run.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
. bench/common/build_bench.sh
build_bench //bench/offload:io_bench
io_bench=$bench_bin
build_bench //examples:train_gpt2
train=$bench_bin
build_bench //cli:zeroshard
cli=$bench_bin
config=examples/configs/gpt2_xl_offload.pbtxt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "## Without offload"
echo
echo '```'
if "$cli" check-config "$config" --world-size 1 --set engine.offload.optimizer_state=DEVICE \
    --set engine.offload.master_weights=DEVICE >"$tmp/refused.txt" 2>&1; then
  echo "check-config accepted the plan without offload (expected a refusal)"
  cat "$tmp/refused.txt"
  echo '```'
  exit 1
fi
grep -m1 "memory plan exceeds the limit" "$tmp/refused.txt" || cat "$tmp/refused.txt"
echo '```'
echo

echo "## Raw bandwidth of $dir (sequential O_DIRECT, 16 MiB blocks)"
echo
"$io_bench" --dir "$dir" --file_mib 2048 --repeats 1 --block_kib 16384 --depths 1,8 --fio=false | tee "$tmp/raw.md"
echo

echo "## With optimizer state and masters on NVMe"
echo
/usr/bin/time -v "$train" --config "$config" --steps "$steps" --set engine.offload.nvme_dir="$dir" \
  --set engine.checkpoint.dir= --set engine.logging.metrics_path="$tmp/metrics.jsonl" \
  --set engine.logging.trace_path= >"$tmp/train.out" 2>"$tmp/train.err" || {
  cat "$tmp/train.out" "$tmp/train.err" >&2
  exit 1
}
rss_kib=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tmp/train.err")
planned=$("$cli" check-config "$config" --world-size 1 --set engine.offload.nvme_dir="$dir" |
  awk '/resident peak/ {print $3}')
python3 - "$tmp/metrics.jsonl" "$rss_kib" "$planned" "$tmp/raw.md" <<'PY'
import json, re, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
steps = [l for l in lines if "step" in l and "io" in l]
rss = int(sys.argv[2]) * 1024
# Raw sequential O_DIRECT figures of this run (the last column of each table).
raw = [float(m) for m in re.findall(r"\| 16 MiB \|.*\| ([0-9.]+) \|\n", open(sys.argv[4]).read())]
raw_write, raw_read = (raw + [0, 0])[:2]
print("| step | loss | s/step | read GB | written GB | I/O busy s | raw-bandwidth time for those bytes, s | raw time / step |")
print("|---|---|---|---|---|---|---|---|")
for s in steps:
    io = s["io"]
    sec = s.get("step_ms", 0) / 1000
    raw_s = io["read_bytes"] / 1e9 / raw_read + io["write_bytes"] / 1e9 / raw_write if raw_read and raw_write else 0
    print(f"| {s['step']} | {s['loss']:.4f} | {sec:.1f} | {io['read_bytes']/1e9:.2f} | {io['write_bytes']/1e9:.2f} | "
          f"{io['busy_ms']/1000:.1f} | {raw_s:.1f} | {raw_s/sec:.2f} |")
planned = int(sys.argv[3] or 0)
print()
print(f"peak RSS {rss/2**30:.2f} GiB; planned resident peak (check-config) {planned/2**30:.2f} GiB"
      + (f" (measured/plan {rss/planned:.3f})" if planned else ""))
PY
