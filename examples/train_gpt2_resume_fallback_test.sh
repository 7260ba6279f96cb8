#!/usr/bin/env bash
# Resume with a corrupt `latest` on 2 ranks: the trainer warns naming the
# bad step (with its verification error) and the one it uses, resumes from
# the previous step and ends bitwise equal to the uninterrupted run.
# Usage: train_gpt2_resume_fallback_test.sh TRAIN_GPT2 CONFIG CORPUS ZEROSHARD
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
bin=$1 config=$2 corpus=$3 zeroshard=$4
tmp=${TEST_TMPDIR:-$(mktemp -d)}
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/mpirun_local.sh"
common=(--set "data.train_path=$corpus" --set "data.val_path=$corpus" --set eval_interval=0 --set steps=12 --set engine.checkpoint.interval=4)

run() {  # run LOGNAME ARGS...  -> sets rc; output in $tmp/LOGNAME.log
  local name=$1
  shift
  timeout 300 mpirun "${mpirun_flags[@]}" -np 2 "$bin" --config "$config" "${common[@]}" "$@" >"$tmp/$name.log" 2>&1
  rc=$?
}

run whole --set "engine.checkpoint.dir=$tmp/ckA"
rc_whole=$rc
run first --steps 8 --set "engine.checkpoint.dir=$tmp/ckB"
rc_first=$rc
# One flipped byte near the end of step_8's first shard file.
f="$tmp/ckB/step_8/shard_pp000_dp00000_tp000.safetensors"
size=$(stat -c %s "$f")
printf '\x7f' | dd of="$f" bs=1 seek=$((size - 8)) conv=notrunc status=none
run resumed --resume --set "engine.checkpoint.dir=$tmp/ckB"
grep -q "^zeroshard: warning: checkpoint $tmp/ckB/step_8 fails verification: .*shard_pp000_dp00000_tp000.safetensors.*; resuming from $tmp/ckB/step_4 (step 4), the newest that verifies$" "$tmp/resumed.log"
warned=$?
grep -q "^zeroshard: resumed from $tmp/ckB/step_4 at step 4" "$tmp/resumed.log"
resumed=$?
record_case corrupt_latest_warns_and_resumes_from_previous \
  $((rc_whole == 0 && rc_first == 0 && rc == 0 && warned == 0 && resumed == 0)) \
  "rc $rc_whole $rc_first $rc warned $warned resumed $resumed: $(head -20 "$tmp/resumed.log")"
"$zeroshard" ckpt diff "$tmp/ckA/step_12" "$tmp/ckB/step_12" --tol 0 >"$tmp/diff.log" 2>&1
st=$?
record_case resumed_run_ends_bitwise_equal $((st == 0)) "diff rc $st: $(tail -5 "$tmp/diff.log")"

# No step verifies: --resume is a named error on every rank.
for d in "$tmp"/ckB/step_*; do
  printf '\x7f' | dd of="$d/shard_pp000_dp00000_tp000.safetensors" bs=1 seek=100 conv=notrunc status=none
done
run none --resume --set "engine.checkpoint.dir=$tmp/ckB"
grep -q "no checkpoint under '$tmp/ckB' verifies: $tmp/ckB/step_12 fails verification: " "$tmp/none.log"
named=$?
record_case no_verified_checkpoint_is_a_named_error $((rc != 0 && named == 0)) "rc $rc: $(head -10 "$tmp/none.log")"
finish_cases
