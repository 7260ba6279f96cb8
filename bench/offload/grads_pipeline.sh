#!/usr/bin/env bash
# Gradient shards on NVMe under a pipeline: GPT-2 124M shapes cut to 4
# layers (examples/configs/gpt2_124m.pbtxt, n_layer 4), ZeRO-2, dp 1 x pp 2
# on this host, 4 micro-batches, f32; engine.offload.grads DEVICE against
# NVME (2 staging slots of 16 MiB), every other class resident. Prints a markdown table per stage: the
# planned resident peak (check-config), the measured peak RSS (/usr/bin/time
# per rank), their ratio, the median s/step, and NVME against DEVICE in the
# same run for both.
# Usage: bench/offload/grads_pipeline.sh [--dir DIR] [--steps N]
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=/var/tmp
steps=3
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "grads_pipeline.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
[ -s datasets/corpus_train.bin ] || tools/prepare-data >&2
. bench/common/build_bench.sh
build_bench //examples:train_gpt2 //cli:zeroshard
train=$bench_bin_dir/examples/train_gpt2
cli=$bench_bin_dir/cli/zeroshard
config=examples/configs/gpt2_124m.pbtxt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
layout=(--set model.n_layer=4 --set engine.parallel.dp=1 --set engine.parallel.pp=2 --set engine.zero.stage=2
  --set engine.gradient_accumulation_steps=4 --set data.batch_size=8 --set engine.offload.nvme_dir="$dir"
  --set engine.offload.buffer_count=2 --set engine.offload.buffer_bytes=16777216)
. bazel/mpirun_local.sh
for grads in DEVICE NVME; do
  # check-config prints one table per distinct plan ("rank 0:", "rank 1:").
  "$cli" check-config "$config" --world-size 2 "${layout[@]}" --set engine.offload.grads="$grads" |
    awk '/^ranks? / {label=$0} /resident peak/ {print label, $3}' >"$tmp/plan.$grads"
  mpirun "${mpirun_flags[@]}" -np 2 bash -c '/usr/bin/time -v -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' \
    "$tmp/time.$grads" "$train" --config "$config" --steps "$steps" "${layout[@]}" --set engine.offload.grads="$grads" \
    --set engine.checkpoint.dir= --set engine.logging.trace_path= --set eval_interval=0 \
    --set engine.logging.metrics_path="$tmp/metrics.$grads.jsonl" >"$tmp/train.$grads.out" 2>&1 || {
    cat "$tmp/train.$grads.out" >&2
    exit 1
  }
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
python3 - "$tmp" <<'PY'
import json, re, statistics, sys
tmp = sys.argv[1]
def plan(grads):
    out = {}
    for line in open(f"{tmp}/plan.{grads}"):
        label, value = line.rsplit(" ", 1)
        for r in re.findall(r"\d+", label):
            out[int(r)] = int(value)
    return out
def rss(grads, rank):
    t = open(f"{tmp}/time.{grads}.{rank}").read()
    return int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1)) * 1024
def step_s(grads):
    lines = [json.loads(l) for l in open(f"{tmp}/metrics.{grads}.jsonl")]
    ms = [l["step_ms"] for l in lines if "step" in l and "step_ms" in l][1:]  # the first step warms up
    return statistics.median(ms) / 1000 if ms else float("nan")
plans = {g: plan(g) for g in ("DEVICE", "NVME")}
secs = {g: step_s(g) for g in ("DEVICE", "NVME")}
gib = 2**30
print("| grads | rank (stage) | planned resident GiB | peak RSS GiB | RSS / plan | median s/step |")
print("|---|---|---|---|---|---|")
for g in ("DEVICE", "NVME"):
    for r in (0, 1):
        p, m = plans[g].get(r, 0), rss(g, r)
        print(f"| {g} | {r} | {p/gib:.3f} | {m/gib:.3f} | {m/p if p else 0:.3f} | {secs[g]:.2f} |")
print()
print("| rank (stage) | planned NVME / DEVICE | measured RSS NVME / DEVICE | planned saving MiB | measured saving MiB |")
print("|---|---|---|---|---|")
for r in (0, 1):
    pd, pn, md, mn = plans["DEVICE"].get(r, 0), plans["NVME"].get(r, 0), rss("DEVICE", r), rss("NVME", r)
    print(f"| {r} | {pn/pd if pd else 0:.3f} | {mn/md:.3f} | {(pd-pn)/2**20:.1f} | {(md-mn)/2**20:.1f} |")
PY
