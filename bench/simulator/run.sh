#!/usr/bin/env bash
# The calibrated simulator against measured steps (docs/simulator.md): one
# traced run gives a cost profile; `zeroshard schedule --profile` predicts
# the other layouts from it; each layout is then run and traced, and its
# median step compared.
#   dp 2: ZeRO stages 0-3, profiled from the stage 3 run;
#   pp 2 (dp 1), m 8: GPIPE, ONE_F_ONE_B, INTERLEAVED_1F1B (v 2), ZERO_BUBBLE_H1,
#         profiled from the ZERO_BUBBLE_H1 run (its split backward measured).
# Usage: bench/simulator/run.sh [STEPS [ROUNDS]] (traced steps per run,
# default 6; interleaved rounds, default 3).
# Prints markdown tables; BAZEL_ROOT, BAZEL_FLAGS: bench/common/build_bench.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${1:-6}
rounds=${2:-3}
. tools/lib/openblas_env.sh
. bench/common/build_bench.sh
build_bench //examples:train_gpt2 //cli:zeroshard
trainer=$bench_bin
zeroshard=$bench_bin_dir/cli/zeroshard
tools/prepare-data >/dev/null
. bazel/mpirun_local.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The zero benchmark's shape: 4 blocks, C 256, V 8192, T 64, 4 sequences a
# rank (dp 2: 8 a step); the pipeline's: 8 blocks x 192, V 128, 4 x 64
# tokens a micro-batch (32 sequences a step at m 8). One thread a rank.
write_config() {  # write_config FILE MODEL BATCH ENGINE
  cat > "$1" <<EOF
model { $2 }
data { train_path: "datasets/corpus_train.bin" batch_size: $3 }
steps: 1000
eval_interval: 0
engine {
  optimizer { type: ADAMW lr: 1e-3 }
  device { threads_per_rank: 1 }
  logging { interval: 1000 }
  seed: 7
  $4
}
EOF
}
write_config "$work/dp.pbtxt" "n_layer: 4 n_head: 4 n_embd: 256 vocab_size: 8192 seq_len: 64" 8 \
  "parallel { dp: 2 } zero { bucket_bytes: 1048576 }"
write_config "$work/pp.pbtxt" "n_layer: 8 n_head: 4 n_embd: 192 vocab_size: 256 seq_len: 64" 32 \
  "parallel { pp: 2 } gradient_accumulation_steps: 8"

# traced_step CONFIG NAME SET...: runs steps + 1 steps (the first untraced
# warm-up is not: trace_steps counts from step 1, so one more is run and the
# median absorbs it), writes NAME.profile.pbtxt, prints the median step ms.
traced_step() {
  local config=$1 name=$2
  shift 2
  local sets=()
  for s in "$@"; do sets+=(--set "$s"); done
  mpirun "${mpirun_flags[@]}" -np 2 "$trainer" --config "$config" --steps $((steps + 1)) "${sets[@]}" \
    --set engine.logging.trace_path="$work/$name.trace.json" --set engine.logging.trace_steps=$((steps + 1)) \
    >"$work/$name.log" 2>&1 || { cat "$work/$name.log" >&2; exit 1; }
  "$zeroshard" trace "$work/$name.trace.json" --write-profile "$work/$name.profile.pbtxt" >/dev/null
  awk '/^measured_step_seconds:/ { printf "%.1f", $2 * 1000 }' "$work/$name.profile.pbtxt"
}

# predicted CONFIG PROFILE SET...: the predicted step ms and bubble ("-"
# outside a pipeline), space-separated.
predicted() {
  local config=$1 profile=$2
  shift 2
  local sets=()
  for s in "$@"; do sets+=(--set "$s"); done
  "$zeroshard" schedule "$config" --profile "$profile" "${sets[@]}" | awk '/^predicted step/ {
    step = $0; sub(/^[^:]*: /, "", step); sub(/ ms.*/, "", step)
    bubble = "-"; if (match($0, /bubble [0-9.]+/)) bubble = substr($0, RSTART + 7, RLENGTH - 7)
    print step, bubble }'
}

ratio() { python3 -c "print(f'{$1 / $2:.3f}')"; }

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%.1f\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# Rounds interleave the layouts (the machine's noise drifts); each layout's
# measured step is the median over rounds of its runs' median steps. The
# profile is the profiled layout's median run (the round whose step is the
# median), so one noisy run does not set every prediction.
pp_layouts=(GPIPE:1 ONE_F_ONE_B:1 INTERLEAVED_1F1B:2 ZERO_BUBBLE_H1:1)
declare -A runs
for round in $(seq 1 "$rounds"); do
  for stage in 0 1 2 3; do
    runs[zero$stage]+=" $(traced_step "$work/dp.pbtxt" "zero$stage.r$round" engine.zero.stage=$stage)"
  done
  for spec in "${pp_layouts[@]}"; do
    schedule=${spec%:*} v=${spec#*:}
    runs[$schedule]+=" $(traced_step "$work/pp.pbtxt" "$schedule.r$round" engine.parallel.pipeline_schedule=$schedule \
      engine.parallel.virtual_stages=$v)"
  done
done

# median_round NAME: the round of NAME's median run.
median_round() {
  local m r=1
  m=$(median ${runs[$1]})
  for v in ${runs[$1]}; do
    [ "$v" = "$m" ] && { echo "$r"; return; }
    r=$((r + 1))
  done
  echo 1
}
dp_profile=$work/zero3.r$(median_round zero3).profile.pbtxt
pp_profile=$work/ZERO_BUBBLE_H1.r$(median_round ZERO_BUBBLE_H1).profile.pbtxt

echo "## Predicted vs measured step, dp 2, GPT-2 4 x 256, V 8192, T 64, 4 sequences a rank, 1 thread a rank"
echo
echo "Profile: the median stage 3 run's trace ($steps traced steps + 1), \`zeroshard trace --write-profile\`; measured: median over $rounds interleaved rounds of each run's median step."
echo
echo "| stage | measured ms | runs | predicted ms | predicted / measured |"
echo "|---|---|---|---|---|"
for stage in 0 1 2 3; do
  m=$(median ${runs[zero$stage]})
  read -r p _ < <(predicted "$work/dp.pbtxt" "$dp_profile" engine.zero.stage=$stage)
  echo "| $stage | $m |${runs[zero$stage]} | $p | $(ratio "$p" "$m") |"
done

echo
echo "## Predicted vs measured step, pp 2 (dp 1), m 8, GPT-2 8 x 192, V 256, 4 x 64 tokens a micro-batch, ZeRO 0"
echo
echo "Profile: the median ZERO_BUBBLE_H1 run's trace (its split backward measured); no link is fitted at dp 1, so transfers are not priced."
echo
echo "| schedule | v | measured ms | runs | predicted ms | predicted / measured | predicted bubble |"
echo "|---|---|---|---|---|---|---|"
for spec in "${pp_layouts[@]}"; do
  schedule=${spec%:*} v=${spec#*:}
  m=$(median ${runs[$schedule]})
  read -r p bubble < <(predicted "$work/pp.pbtxt" "$pp_profile" \
    engine.parallel.pipeline_schedule=$schedule engine.parallel.virtual_stages=$v)
  echo "| $schedule | $v | $m |${runs[$schedule]} | $p | $(ratio "$p" "$m") | $bubble |"
done
