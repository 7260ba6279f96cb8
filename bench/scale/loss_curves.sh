#!/usr/bin/env bash
# Does int8 communication change what the model learns? Trains the tiny config
# (examples/configs/tiny.pbtxt on the generated tiny corpus) with train_gpt2
# at dp 4, ZeRO 3, for 500 steps, four ways on the same batches: unquantized;
# int8 weights (default block, 2048); int8 gradients (block 256: 2048-element
# blocks of wte's gradient mix frequent and rare tokens' rows); both with
# hybrid sharding S 2 (block 256). Writes bench/results/quantization_loss.svg
# (training loss per step, 20-step running mean) and prints a markdown table:
# the mean of the last 20 steps' loss, its difference to the unquantized run,
# and the bytes rank 0 sent per step.
# Usage: bench/scale/loss_curves.sh [extra train_gpt2 flags, given to every
# run]. Metrics and logs go to $LOSS_CURVES_DIR (default: a new temporary
# directory), the picture to $LOSS_CURVES_SVG (default the one above).
# BAZEL_ROOT and BAZEL_FLAGS as in bench/common/build_bench.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tools/lib/openblas_env.sh
. bench/common/build_bench.sh
build_bench //examples:train_gpt2 //data:corpus/tiny_corpus.bin
bin_dir=$bench_bin_dir
corpus="$bin_dir/data/corpus/tiny_corpus.bin"
out=${LOSS_CURVES_DIR:-$(mktemp -d)}
svg=${LOSS_CURVES_SVG:-bench/results/quantization_loss.svg}
mkdir -p "$out" "$(dirname "$svg")"
steps=500

. bazel/mpirun_local.sh
common=(--config examples/configs/tiny.pbtxt --set "data.train_path=$corpus" --set "data.val_path=$corpus"
        --set "steps=$steps" --set engine.parallel.dp=4 --set engine.zero.stage=3 --set eval_interval=0
        --set engine.device.threads_per_rank=1 --set engine.logging.interval=100)

# name|title|flags: the runs, the unquantized one first (the reference).
runs=(
  "unquantized|unquantized|"
  "int8_weights|int8 weights (block 2048)|--set engine.zero.weight_quantization=INT8"
  "int8_grads|int8 gradients (block 256)|--set engine.zero.gradient_quantization=INT8 --set engine.zero.quantization_block=256"
  "int8_both_hsdp|int8 weights + gradients, HSDP S 2 (block 256)|--set engine.zero.weight_quantization=INT8 --set engine.zero.gradient_quantization=INT8 --set engine.zero.quantization_block=256 --set engine.zero.shard_group_size=2"
)
for entry in "${runs[@]}"; do
  IFS='|' read -r name title run_flags <<< "$entry"
  read -r -a run_flags <<< "$run_flags"
  echo "loss_curves: $title ($out/$name.log)" >&2
  mpirun "${mpirun_flags[@]}" -np 4 "$bin_dir/examples/train_gpt2" "${common[@]}" "${run_flags[@]}" \
    --set "engine.logging.metrics_path=$out/$name.jsonl" "$@" >"$out/$name.log" 2>&1 ||
    { tail -20 "$out/$name.log" >&2; exit 1; }
done

# Smoothed curves (one .dat per run) and the table.
python3 - "$out" "${runs[@]}" <<'PY'
import json, sys
out, entries = sys.argv[1], [e.split("|") for e in sys.argv[2:]]
window = 20
results = []
for name, title, _ in entries:
    rows = [json.loads(l) for l in open(f"{out}/{name}.jsonl")][1:]  # the first line is the header
    losses = [r["loss"] for r in rows]
    with open(f"{out}/{name}.dat", "w") as f:
        for i, r in enumerate(rows):
            recent = losses[max(0, i + 1 - window):i + 1]
            f.write(f"{r['step']} {sum(recent) / len(recent)}\n")
    bytes_per_step = sorted(r["comm_bytes"] for r in rows)[len(rows) // 2]  # the same every step
    results.append((title, rows[-1]["step"], sum(losses[-window:]) / window, bytes_per_step))
base_loss, base_bytes = results[0][2], results[0][3]
print(f"| run | steps | loss (mean of the last {window} steps) | vs unquantized | comm bytes per step (rank 0) "
      "| vs unquantized |")
print("|---|---|---|---|---|---|")
for title, steps, loss, b in results:
    print(f"| {title} | {steps} | {loss:.4f} | {(loss - base_loss) / base_loss:+.2%} | {b / 1e6:.3f} MB | "
          f"{b / base_bytes:.3f} |")
PY

plot="plot"
for entry in "${runs[@]}"; do
  IFS='|' read -r name title _ <<< "$entry"
  plot+=" '$out/$name.dat' using 1:2 with lines lw 1.5 title '$title',"
done
gnuplot -e "set terminal svg size 720,420 noenhanced; set output '$svg'; \
  set xlabel 'step'; set ylabel 'train loss (20-step running mean)'; set key top right; \
  set title 'GPT-2 tiny (examples/configs/tiny.pbtxt), dp 4, ZeRO 3${*:+, $*}'; ${plot%,}"
echo "loss_curves: wrote $svg; metrics and logs in $out" >&2
