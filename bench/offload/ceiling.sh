#!/usr/bin/env bash
# The ceiling: the largest GPT-2-shaped model the memory planner accepts on
# one rank of this machine with every state class the engine can stream on
# the NVMe tier, then --steps steps of it without a checkpoint, as markdown:
#   1. the classes on NVMe: optimizer_state and master_weights, and params
#      and grads where check-config accepts them (a refused class stays
#      resident; its refusal is printed);
#   2. the search: for each width n_embd of a ladder (n_head = n_embd / 64,
#      1600 with 25 heads as GPT-2 XL), the most layers whose plan
#      check-config accepts under --limit-mib and whose NVMe files fit in
#      DIR's free space less --margin-gb (bisection: both grow with layers);
#      parameters, planned resident peak, NVMe bytes, free disk;
#   3. the shape with the most parameters trained --steps steps: s/step,
#      bytes read and written, peak RSS against the plan.
# Shapes otherwise as examples/configs/gpt2_xl_offload.pbtxt (B1 x T128,
# AdamW, bf16 compute, f32 masters, ZeRO-3, 4 x 64 MiB staging slots).
# Usage: bench/offload/ceiling.sh [--dir DIR] [--steps N] [--limit-mib M]
#          [--margin-gb G] [--plan-only]
# The run needs the NVMe bytes of the table in DIR (default /var/tmp) for
# its duration (the files vanish at exit) and writes no checkpoint.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=/var/tmp
steps=2
limit_mib=20480
margin_gb=10
plan_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --limit-mib) limit_mib=$2; shift 2 ;;
    --margin-gb) margin_gb=$2; shift 2 ;;
    --plan-only) plan_only=1; shift ;;
    *) echo "ceiling.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
. bench/common/build_bench.sh
build_bench //cli:zeroshard
cli=$bench_bin
if [ "$plan_only" = 0 ]; then
  build_bench //examples:train_gpt2
  train=$bench_bin
fi
config=examples/configs/gpt2_xl_offload.pbtxt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
base=(--world-size 1 --set engine.offload.nvme_dir="$dir" --set engine.memory_limit_mib="$limit_mib")

echo "## Classes on NVMe"
echo
classes=(--set engine.offload.optimizer_state=NVME --set engine.offload.master_weights=NVME)
names="optimizer_state, master_weights"
for class in params grads; do
  if "$cli" check-config "$config" "${base[@]}" "${classes[@]}" --set engine.offload.$class=NVME >"$tmp/class.txt" 2>&1; then
    classes+=(--set engine.offload.$class=NVME)
    names="$names, $class"
  else
    echo "- $class stays resident: \`$(grep -m1 "engine.offload.$class" "$tmp/class.txt" || tail -1 "$tmp/class.txt")\`"
  fi
done
echo "- on NVMe: $names"
echo

free_bytes=$(df -B1 --output=avail "$dir" | tail -1 | tr -d ' ')
disk_budget=$((free_bytes - margin_gb * 1000000000))
# check LAYERS EMBD -> 0 when accepted within the disk budget; prints
# "params resident nvme" to $tmp/plan.txt.
check() {
  local layers=$1 embd=$2
  "$cli" check-config "$config" "${base[@]}" "${classes[@]}" --set model.n_layer="$layers" \
    --set model.n_embd="$embd" --set model.n_head=$((embd == 1600 ? 25 : embd / 64)) >"$tmp/check.txt" 2>&1 || return 1
  local params resident nvme
  params=$(sed -n 's/.*: \([0-9]*\) parameters$/\1/p' "$tmp/check.txt" | head -1)
  resident=$(awk '/resident peak/ {print $3; exit}' "$tmp/check.txt")
  nvme=$(awk '/resident peak/ {for (i = 1; i < NF; i++) if ($i == "files") {print $(i + 1); exit}}' "$tmp/check.txt")
  [ -n "$params" ] && [ -n "$resident" ] && [ -n "$nvme" ] || return 1
  [ "$nvme" -le "$disk_budget" ] || return 1
  echo "$params $resident $nvme" >"$tmp/plan.txt"
}

echo "## The largest accepted shape per width (limit $((limit_mib / 1024)) GiB, $dir: $((free_bytes / 1000000000)) GB free, $margin_gb GB kept free)"
echo
echo "| n_embd | n_head | n_layer | parameters | planned resident peak GiB | NVMe files GB |"
echo "|---|---|---|---|---|---|"
best_params=0
best=""
for embd in 1600 2048 2560 3072 4096 5120 6144 8192; do
  lo=0 hi=257  # lo accepted (0: none yet), hi refused
  while [ $((hi - lo)) -gt 1 ]; do
    mid=$(((lo + hi) / 2))
    if check "$mid" "$embd"; then lo=$mid; else hi=$mid; fi
  done
  if [ "$lo" = 0 ]; then
    echo "| $embd | $((embd == 1600 ? 25 : embd / 64)) | none | | | |"
    continue
  fi
  check "$lo" "$embd"
  read -r params resident nvme <"$tmp/plan.txt"
  printf '| %s | %s | %s | %s | %.2f | %.1f |\n' "$embd" $((embd == 1600 ? 25 : embd / 64)) "$lo" "$params" \
    "$(echo "$resident / 2^30" | bc -l)" "$(echo "$nvme / 10^9" | bc -l)"
  if [ "$params" -gt "$best_params" ]; then
    best_params=$params
    best="$lo $embd $resident $nvme"
  fi
done
echo
[ -n "$best" ] || { echo "no shape accepted"; exit 1; }
read -r layers embd resident nvme <<<"$best"
heads=$((embd == 1600 ? 25 : embd / 64))
echo "Ceiling: n_layer $layers, n_embd $embd, n_head $heads: $best_params parameters."
[ "$plan_only" = 1 ] && exit 0
echo
echo "## $steps steps of it (no checkpoint)"
echo
/usr/bin/time -v -o "$tmp/time" "$train" --config "$config" --steps "$steps" "${classes[@]}" \
  --set engine.offload.nvme_dir="$dir" --set engine.memory_limit_mib="$limit_mib" \
  --set model.n_layer="$layers" --set model.n_embd="$embd" --set model.n_head="$heads" \
  --set engine.checkpoint.dir= --set engine.logging.metrics_path="$tmp/metrics.jsonl" \
  --set engine.logging.trace_path= >"$tmp/train.out" 2>"$tmp/train.err" || {
  cat "$tmp/train.out" "$tmp/train.err" >&2
  exit 1
}
python3 - "$tmp/metrics.jsonl" "$tmp/time" "$resident" <<'PY'
import json, re, sys
steps = [l for l in map(json.loads, open(sys.argv[1])) if "step" in l and "io" in l]
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(sys.argv[2]).read()).group(1)) * 1024
planned = int(sys.argv[3])
print("| step | loss | s/step | read GB | written GB | I/O busy s |")
print("|---|---|---|---|---|---|")
for s in steps:
    io = s["io"]
    print(f"| {s['step']} | {s['loss']:.4f} | {s['step_ms']/1000:.1f} | {io['read_bytes']/1e9:.2f} | "
          f"{io['write_bytes']/1e9:.2f} | {io['busy_ms']/1000:.1f} |")
print()
print(f"peak RSS {rss/2**30:.2f} GiB; planned resident peak {planned/2**30:.2f} GiB (measured/plan {rss/planned:.3f})")
PY
