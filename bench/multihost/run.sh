#!/usr/bin/env bash
# Two network-namespace hosts (tools/cluster) with data links shaped to
# RATE: comm-bench between the hosts (one rank each) against the shaped
# rate, with Open MPI's fixed rules and with the tuned ones below; then, on
# 2 hosts x 2 ranks under the tuned rules, flat ZeRO-3, PER_HOST hybrid
# sharding and PER_HOST with int8 weights, gradients and replicas: step
# time and inter-host bytes (against the step program's, `zeroshard
# schedule`) with a GPT-2-124M-shaped model of 4 layers, and the tiny
# config's loss after 100 steps. Writes bench/results/multihost.md. Root
# with CAP_NET_ADMIN.
# Usage: bench/multihost/run.sh [--link 1gbit] [--steps 4] [--loss-steps 100] [--no-train]
# BAZEL_ROOT / BAZEL_FLAGS as bench/common/build_bench.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
link=1gbit steps=4 loss_steps=100 train=1
while [ $# -gt 0 ]; do
  case $1 in
    --link) link=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --loss-steps) loss_steps=$2; shift 2 ;;
    --no-train) train=0; shift ;;
    *) echo "usage: $0 [--link RATE] [--steps N] [--loss-steps N] [--no-train]" >&2; exit 2 ;;
  esac
done
. bench/common/build_bench.sh
build_bench //cli:comm_bench_main //examples:train_gpt2 //data:tiny_corpus //cli:zeroshard
comm_bench=$bench_bin_dir/cli/comm_bench_main
zeroshard=$bench_bin_dir/cli/zeroshard
trainer=$bench_bin_dir/examples/train_gpt2
corpus=$bench_bin_dir/data/corpus/tiny_corpus.bin
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
out=bench/results/multihost.md
tmp=$(mktemp -d)
trap 'tools/cluster down >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

# tc rate -> bytes/s (tbf counts the Ethernet frames' bytes).
rate_bps=$(python3 -c '
import re, sys
m = re.fullmatch(r"([0-9.]+)([kmg]?)bit", sys.argv[1])
print(int(float(m[1]) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m[2]] / 8))' "$link")

# Open MPI's tuned algorithms for 2 ranks over TCP (bench/multihost/coll_sweep.sh
# measured each choice): recursive doubling for MPI_Reduce_scatter_block
# and MPI_Allreduce. mpirun passes OMPI_MCA_* on.
tuned=(OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_reduce_scatter_block_algorithm=2
  OMPI_MCA_coll_tuned_allreduce_algorithm=3)
load_at() { echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%TZ)"; }

tools/cluster down >/dev/null
tools/cluster up --hosts 2 --slots 1 --link "$link" >/dev/null
comm_ops=(--ops all_gather,reduce_scatter,all_reduce,broadcast --min-bytes 1048576 --max-bytes 16777216 --factor 4
  --iters 20 --warmup 2)
load_comm=$(load_at)
tools/cluster run --np 2 -- "$comm_bench" "${comm_ops[@]}" >"$tmp/comm.txt"
load_tuned=$(load_at)
env "${tuned[@]}" tools/cluster run --np 2 -- "$comm_bench" "${comm_ops[@]}" >"$tmp/comm_tuned.txt"
tools/cluster down >/dev/null

{
  echo "# Two namespace hosts, data links shaped to $link"
  echo
  echo "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ); \`bench/multihost/run.sh --link $link\`."
  echo "Hosts are network namespaces of one machine (\`tools/cluster\`), each with a tbf-shaped"
  echo "data veth (both directions) and MPI over TCP between them."
  echo
  echo "## comm-bench, 1 rank per host (2 ranks)"
  echo
  echo "busbw (nccl-tests formula: for 2 ranks what each rank sends over its link per second, all_reduce"
  echo "counted as one pass) against the shaped rate $link = $(python3 -c "print(f'{$rate_bps/1e9:.3f}')") GB/s;"
  echo "median over 20 iterations of the slowest rank."
  echo
  echo "Fixed rules: $load_comm; tuned rules (\`${tuned[*]}\`): $load_tuned."
  echo
  echo "| op | size | zeroshard busbw (GB/s) | raw MPI busbw (GB/s) | zeroshard / shaped rate | tuned: zeroshard busbw | tuned: raw MPI | tuned: zeroshard / shaped rate |"
  echo "|---|---|---|---|---|---|---|---|"
  # size count | ours_us algbw busbw | raw_us algbw busbw | ...
  paste -d' ' \
    <(awk '/^# [a-z_]+[ ,]/ && !/size/ { op = $2; sub(/,$/, "", op) } /^ +[0-9]+ +[0-9]+ \|/ { print op, $1, $6, $10 }' "$tmp/comm.txt") \
    <(awk '/^ +[0-9]+ +[0-9]+ \|/ { print $6, $10 }' "$tmp/comm_tuned.txt") |
    awk -v rate="$rate_bps" '{ printf "| %s | %d MiB | %.3f | %.3f | %.0f %% | %.3f | %.3f | %.0f %% |\n", $1, $2 / 1048576,
      $3, $4, 100 * $3 * 1e9 / rate, $5, $6, 100 * $5 * 1e9 / rate }'
  echo
  echo "Raw MPI calls move the same bytes as zeroshard's layer, so a low ratio is Open MPI's algorithm over"
  echo "TCP, not the layer. Under the fixed rules MPI_Reduce_scatter_block at 2 ranks is a reduce to one rank"
  echo "then a scatter (about a third of the link) and MPI_Allreduce segments a ring (about two thirds);"
  echo "recursive halving and recursive doubling exchange halves and whole buffers in both directions at once."
  echo
  echo "## Every coll_tuned choice at 16 MiB (\`bench/multihost/coll_sweep.sh\`)"
  echo
} >"$out"
bench/multihost/coll_sweep.sh --link "$link" --iters 10 2>/dev/null | sed 's/^load average/Load average/' >>"$out"
echo >>"$out"

if [ "$train" = 1 ]; then
  tools/cluster up --hosts 2 --slots 2 --link "$link" >/dev/null
  common=(--config examples/configs/tiny.pbtxt --set "data.train_path=$corpus" --set "data.val_path=$corpus"
    --set engine.parallel.dp=4 --set engine.zero.stage=3 --set eval_interval=0 --set engine.logging.interval=1)
  big=(--set model.n_layer=4 --set model.n_head=12 --set model.n_embd=768 --set model.vocab_size=50257
    --set model.seq_len=64 --set data.batch_size=4)
  # The layouts: name, --set flags under PER_HOST's resolution on 2 x 2
  # (shard groups of 2) for `zeroshard schedule`, and the run's flags.
  per_host=(--set engine.zero.shard_group=PER_HOST)
  int8=(--set engine.zero.weight_quantization=INT8 --set engine.zero.gradient_quantization=INT8
    --set engine.zero.replica_quantization=INT8)
  names=(flat per_host replica_int8 int8)
  run_layout() {  # run_layout NAME STEPS OUT FLAGS...
    local name=$1 n=$2 out_jsonl=$3; shift 3
    local flags=()
    case $name in
      per_host) flags=("${per_host[@]}") ;;
      replica_int8) flags=("${per_host[@]}" --set engine.zero.replica_quantization=INT8) ;;
      int8) flags=("${per_host[@]}" "${int8[@]}") ;;
    esac
    env "${tuned[@]}" tools/cluster run --np 4 -- "$trainer" "${common[@]}" "$@" "${flags[@]}" --steps "$n" \
      --set "engine.logging.metrics_path=$out_jsonl" >"${out_jsonl%.jsonl}.log" 2>&1
    echo "$(load_at)" >"${out_jsonl%.jsonl}.load"
  }
  for name in "${names[@]}"; do run_layout "$name" "$steps" "$tmp/$name.jsonl" "${big[@]}"; done
  # The tiny config at lr 1e-3 (at its own 3e-3 every layout meets a loss
  # spike near step 62: docs/parallelism.md).
  for name in "${names[@]}"; do
    run_layout "$name" "$loss_steps" "$tmp/tiny_$name.jsonl" --set engine.optimizer.lr=1e-3
  done
  tools/cluster down >/dev/null
  # The step program's bytes per group (rank 0), PER_HOST resolved to shard groups of 2.
  for name in "${names[@]}"; do
    case $name in
      flat) flags=() ;;
      per_host) flags=(--set engine.zero.shard_group_size=2) ;;
      replica_int8) flags=(--set engine.zero.shard_group_size=2 --set engine.zero.replica_quantization=INT8) ;;
      int8) flags=(--set engine.zero.shard_group_size=2 "${int8[@]}") ;;
    esac
    "$zeroshard" schedule examples/configs/tiny.pbtxt "${common[@]:2}" "${big[@]}" "${flags[@]}" >"$tmp/sched_$name.txt"
  done
  python3 - "$tmp" "$steps" >>"$out" <<'PY'
import json, os, re, statistics, sys
tmp, steps = sys.argv[1], int(sys.argv[2])
names = {"flat": "flat ZeRO-3 (shard over 4)", "per_host": "PER_HOST (shard over 2, replicate over 2)",
         "replica_int8": "PER_HOST + int8 replicas", "int8": "PER_HOST + int8 weights, gradients, replicas"}
def load(f):
    lines = [json.loads(l) for l in open(f)]
    return lines[0], lines[1:]
def theory(name):
    # Groups that span the 2 hosts: flat dp (the whole job); PER_HOST the
    # replica group and the world sums.
    total = 0
    for line in open(os.path.join(tmp, f"sched_{name}.txt")):
        m = re.match(r"\s+(\S+) \S+\s+\d+ calls?\s+(\d+) bytes", line)
        if m and m[1] in (("dp", "world") if name == "flat" else ("dp_replica", "world")):
            total += int(m[2])
    return total
hdr, _ = load(os.path.join(tmp, "flat.jsonl"))
print("## Step time and inter-host bytes, 2 hosts x 2 ranks, GPT-2-124M shapes with 4 layers")
print()
print(f"{hdr['num_params']/1e6:.1f} M parameters, f32, ZeRO-3, {hdr['tokens_per_step']} tokens per step, "
      f"{steps} steps, Open MPI's tuned rules; median over the steps after the first; inter-host bytes of rank 0 "
      "against the step program's bytes on the groups that span hosts (`zeroshard schedule`, docs/metrics.md).")
print()
print("Compute: the straggler report's median over ranks of TrainStep time minus collective waits (docs/metrics.md).")
print()
print("| layout | shard group | step (ms) | vs flat | compute (ms) | comm bytes per step (MiB) | inter-host bytes per step (MiB) | program's (MiB) | load average after |")
print("|---|---|---|---|---|---|---|---|---|")
base = None
for name, title in names.items():
    h, rows = load(os.path.join(tmp, f"{name}.jsonl"))
    rows = rows[1:]  # step 1 warms up
    ms = statistics.median(r["step_ms"] for r in rows)
    by = statistics.median(r["comm_bytes"] for r in rows)
    ih = statistics.median(r["inter_host_bytes"] for r in rows)
    compute = statistics.median(r["straggler"]["median_ms"] for r in rows if "straggler" in r)
    base = base or ms
    load_after = open(os.path.join(tmp, f"{name}.load")).read().strip()
    print(f"| {title} | {h.get('shard_group_size', h['dp'])} | {ms:.0f} | {base/ms:.2f}x faster | {compute:.0f} | {by/2**20:.1f} | "
          f"{ih/2**20:.2f} | {theory(name)/2**20:.2f} | {load_after} |")
print()
print("## Tiny config, loss after the last step (lr 1e-3), same layouts")
print()
print("| layout | steps | loss at the last step | mean of the last 10 | vs flat (last 10) |")
print("|---|---|---|---|---|")
ref = None
for name, title in names.items():
    _, rows = load(os.path.join(tmp, f"tiny_{name}.jsonl"))
    last10 = statistics.mean(r["loss"] for r in rows[-10:])
    ref = ref or last10
    print(f"| {title} | {rows[-1]['step']} | {rows[-1]['loss']:.4f} | {last10:.4f} | {100*(last10/ref-1):+.2f} % |")
print()
PY
fi
cat "$out"
