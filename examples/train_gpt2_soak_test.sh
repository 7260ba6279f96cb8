#!/usr/bin/env bash
# Long tier: train_gpt2 over a long trajectory, where a rare difference in
# rounding would have compounded into a visible one. On 3 ranks (odd, so
# the flat parameters do not divide evenly), 240 steps of the tiny config
# widened (C 256, T 128) so that GEMMs are cut into several tiles and
# attention's heads run on several threads:
#   * ZeRO-3 and ZeRO-0 give bitwise the same losses at every step and the
#     same final checkpoint (ckpt diff --tol 0), and the loss falls;
#   * a run stopped at step 120 and resumed with another kernel thread count
#     (1 thread a rank, then 2) continues bit for bit to the same end.
# Usage: train_gpt2_soak_test.sh TRAIN_GPT2 CONFIG CORPUS ZEROSHARD
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
bin=$1 config=$2 corpus=$3 zeroshard=$4
tmp=${TEST_TMPDIR:-$(mktemp -d)}
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/mpirun_local.sh"
steps=240
common=(--set "data.train_path=$corpus" --set "data.val_path=$corpus" --set steps=$steps --set eval_interval=0
  --set engine.parallel.dp=3 --set data.batch_size=12 --set engine.logging.interval=60
  --set model.n_embd=256 --set model.n_head=4 --set model.seq_len=128)

run() {  # run LOGNAME ARGS...  -> sets rc; output in $tmp/LOGNAME.log
  local name=$1
  shift
  timeout 600 mpirun "${mpirun_flags[@]}" -np 3 "$bin" --config "$config" "${common[@]}" "$@" >"$tmp/$name.log" 2>&1
  rc=$?
}

# same_as_stage3 CASE CKPT METRICS LOG RC...: METRICS has bitwise the
# stage-3 run's losses at every step, CKPT its final checkpoint, and every RC
# is 0; LOG (the last run's) goes into the failure message.
same_as_stage3() {
  local name=$1 ck=$2 metrics=$3 log=$4 report st st_diff rcs
  shift 4
  rcs="$*"
  report=$(python3 - "$tmp/s3.jsonl" "$metrics" $steps 2>&1 <<'PY'
import json, sys
rows = [[json.loads(l) for l in open(f)][1:] for f in sys.argv[1:3]]
a, b = ([r["loss"] for r in rs] for rs in rows)
steps = int(sys.argv[3])
ok = len(a) == len(b) == steps and a == b and a[-1] < 0.6 * a[0]
print(f"steps {len(a)}/{len(b)}, first loss {a[0] if a else None}, last {a[-1] if a else None}, equal {a == b}")
sys.exit(0 if ok else 1)
PY
  )
  st=$?
  "$zeroshard" ckpt diff "$tmp/ck3" "$ck" --tol 0 >"$tmp/$name.diff" 2>&1
  st_diff=$?
  local ok=$((st == 0 && st_diff == 0))
  for rc in "$@"; do [ "$rc" = 0 ] || ok=0; done
  record_case "$name" $ok "rc $rcs diff $st_diff: $report $(tail -3 "$tmp/$name.diff") $(tail -3 "$log")"
}

run stage3 --set engine.zero.stage=3 --set "engine.checkpoint.dir=$tmp/ck3" --set "engine.logging.metrics_path=$tmp/s3.jsonl"
rc3=$rc
run stage0 --set engine.zero.stage=0 --set "engine.checkpoint.dir=$tmp/ck0" --set "engine.logging.metrics_path=$tmp/s0.jsonl"
same_as_stage3 stage3_equals_stage0_over_240_steps "$tmp/ck0" "$tmp/s0.jsonl" "$tmp/stage0.log" $rc3 $rc

run first_half --steps 120 --set engine.zero.stage=3 --set engine.device.threads_per_rank=1 \
  --set "engine.checkpoint.dir=$tmp/ckR" --set "engine.logging.metrics_path=$tmp/R.jsonl"
rc_a=$rc
run second_half --resume --set engine.zero.stage=3 --set engine.device.threads_per_rank=2 \
  --set "engine.checkpoint.dir=$tmp/ckR" --set "engine.logging.metrics_path=$tmp/R.jsonl"
same_as_stage3 resume_with_other_threads_continues_bit_for_bit "$tmp/ckR" "$tmp/R.jsonl" "$tmp/second_half.log" \
  $rc3 $rc_a $rc
finish_cases
