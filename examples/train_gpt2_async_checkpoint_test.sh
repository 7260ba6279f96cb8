#!/usr/bin/env bash
# engine.checkpoint.async_save under mpirun, 2 ranks (docs/resilience.md,
# "Asynchronous saves"): an async run trains as a synchronous one and its
# checkpoints hold the same shard files byte for byte; resuming from each of
# its checkpoints continues bit for bit; a failed write on one rank is a named
# error on every rank at a later step boundary, exit 1, latest untouched.
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
bin=$1 config=$2 corpus=$3 zeroshard=$4
tmp=${TEST_TMPDIR:-$(mktemp -d)}
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/mpirun_local.sh"
common=(--config "$config" --set "data.train_path=$corpus" --set "data.val_path=$corpus" --set steps=12
        --set engine.logging.interval=1 --set engine.checkpoint.interval=4)

# train NAME ARGS...: a 2-rank job; sets rc, log in $tmp/NAME.log.
train() {
  local name=$1
  shift
  timeout 300 mpirun "${mpirun_flags[@]}" -np 2 "$bin" "${common[@]}" "$@" >"$tmp/$name.log" 2>&1
  rc=$?
}

# losses_equal A.jsonl B.jsonl FIRST LAST: the same loss and grad norm at
# every step FIRST..LAST, each present once in both.
losses_equal() {
  python3 - "$@" <<'PY'
import json, sys
a, b = ({r['step']: r for r in (json.loads(l) for l in open(f)) if 'step' in r} for f in sys.argv[1:3])
steps = range(int(sys.argv[3]), int(sys.argv[4]) + 1)
ok = all(s in a and s in b and a[s]['loss'] == b[s]['loss'] and a[s]['grad_norm'] == b[s]['grad_norm'] for s in steps)
sys.exit(0 if ok else 1)
PY
}

train async --set "engine.checkpoint.dir=$tmp/ckA" --set engine.checkpoint.async_save=true \
  --set "engine.logging.metrics_path=$tmp/A.jsonl"
rc_a=$rc
train sync --set "engine.checkpoint.dir=$tmp/ckS" --set "engine.logging.metrics_path=$tmp/S.jsonl"
rc_s=$rc
record_case async_and_sync_runs_finish $((rc_a == 0 && rc_s == 0)) \
  "rc $rc_a/$rc_s: $(tail -3 "$tmp/async.log") $(tail -3 "$tmp/sync.log")"
saved=$(grep -c '^zeroshard: saved .*/ckA/step_\(4\|8\|12\)$' "$tmp/async.log")
record_case async_run_commits_every_due_step $(([ "$saved" = 3 ] && [ "$(cat "$tmp/ckA/latest")" = step_12 ]) && echo 1 || echo 0) \
  "saved lines $saved, latest '$(cat "$tmp/ckA/latest" 2>/dev/null)': $(grep saved "$tmp/async.log")"
losses_equal "$tmp/A.jsonl" "$tmp/S.jsonl" 1 12
record_case async_run_trains_as_the_synchronous_one $((! $?)) "$(tail -2 "$tmp/A.jsonl") | $(tail -2 "$tmp/S.jsonl")"

# The snapshot is reported under mem while held (from the first due step on:
# its buffers are kept for the next save) and its peak is the planned bytes.
python3 - "$tmp/A.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])][1:]
snap = [r['mem']['checkpoint_snapshot'] for r in rows]
peak = max(s['peak'] for s in snap)
ok = peak > 0 and all(s['current'] in (0, peak) for s in snap) and snap[4]['current'] == peak and snap[0]['current'] == 0 and snap[-1]['current'] == peak
sys.exit(0 if ok else 1)
PY
record_case snapshot_bytes_are_in_the_metrics $((! $?)) "$(head -c 600 <(sed -n 6p "$tmp/A.jsonl"))"

same=1 detail=""
for s in 4 8 12; do
  for f in "$tmp/ckS/step_$s/"*.safetensors; do
    cmp -s "$f" "$tmp/ckA/step_$s/$(basename "$f")" || { same=0; detail+=" step_$s/$(basename "$f") differs;"; }
  done
  "$zeroshard" ckpt diff "$tmp/ckS/step_$s" "$tmp/ckA/step_$s" --tol 0 >"$tmp/diff_$s.log" 2>&1 ||
    { same=0; detail+=" ckpt diff step_$s: $(tail -2 "$tmp/diff_$s.log");"; }
done
record_case async_checkpoints_equal_sync_byte_for_byte $same "$detail"

# Resuming an async run from each of its checkpoints == the uninterrupted run.
for s in 4 8; do
  mkdir -p "$tmp/ckR$s" && cp -r "$tmp/ckA/step_$s" "$tmp/ckR$s/" && echo "step_$s" >"$tmp/ckR$s/latest"
  train resumed$s --resume --set "engine.checkpoint.dir=$tmp/ckR$s" --set engine.checkpoint.async_save=true \
    --set "engine.logging.metrics_path=$tmp/R$s.jsonl"
  rc_r=$rc
  losses_equal "$tmp/A.jsonl" "$tmp/R$s.jsonl" $((s + 1)) 12
  st_json=$?
  "$zeroshard" ckpt diff "$tmp/ckA/step_12" "$tmp/ckR$s/step_12" --tol 0 >"$tmp/rdiff_$s.log" 2>&1
  st_diff=$?
  record_case resume_from_async_step_${s}_continues_bit_for_bit $((rc_r == 0 && st_json == 0 && st_diff == 0)) \
    "rc $rc_r json $st_json diff $st_diff: $(tail -2 "$tmp/rdiff_$s.log") $(tail -3 "$tmp/resumed$s.log")"
done

# Rank 1's write of step 8 fails: step 4 stays latest, every rank stops with
# the error naming rank 1, its file and the cause, before the job's end.
train failed --set "engine.checkpoint.dir=$tmp/ckF" --set engine.checkpoint.async_save=true \
  --testing_fail_async_write 1:8
msg='writing a shard file failed on dp rank 1: .*/ckF/\.tmp_step_8_[0-9a-f]*/shard_pp000_dp00001_tp000\.safetensors: failed by --testing_fail_async_write; step 8 was not saved'
record_case failed_write_is_a_named_error_on_every_rank \
  $(( rc == 1 && $(grep -c "$msg" "$tmp/failed.log") >= 1 )) "rc=$rc: $(tail -5 "$tmp/failed.log")"
leftover=$(ls -a "$tmp/ckF" | grep -c '^\.tmp_step_\|^step_8$')
record_case failed_write_leaves_latest_untouched \
  $(( $(grep -c '^done:' "$tmp/failed.log") == 0 && leftover == 0 )) \
  "latest '$(cat "$tmp/ckF/latest" 2>/dev/null)', leftover $leftover: $(ls -a "$tmp/ckF")"
[ "$(cat "$tmp/ckF/latest" 2>/dev/null)" = step_4 ]
record_case failed_write_keeps_step_4_as_latest $((! $?)) "latest '$(cat "$tmp/ckF/latest" 2>/dev/null)'"

# SIGTERM with a save every step: the save in flight commits first, then the
# preempted step saves synchronously; exit 75 with it as latest.
rm -f "$tmp/pre.pid."*
timeout 300 mpirun "${mpirun_flags[@]}" -np 2 sh -c 'echo $$ > "$0.$OMPI_COMM_WORLD_RANK"; exec "$@"' \
  "$tmp/pre.pid" "$bin" "${common[@]}" --set steps=60 --set engine.checkpoint.interval=1 \
  --set "engine.checkpoint.dir=$tmp/ckP" --set engine.checkpoint.async_save=true --testing_slow_rank 0:100 \
  >"$tmp/pre.log" 2>&1 &
job=$!
for _ in $(seq 1 600); do
  grep -q "step     3/60" "$tmp/pre.log" 2>/dev/null && [ -s "$tmp/pre.pid.1" ] && break
  sleep 0.1
done
kill -TERM "$(cat "$tmp/pre.pid.1")"
wait "$job"
rc=$?
n=$(sed -n 's/^zeroshard: preempted at step \([0-9]*\) of 60; resume with --resume (exit 75)$/\1/p' "$tmp/pre.log")
prev=$((${n:-1} - 1))
record_case preemption_commits_the_async_save_then_saves_its_step \
  $(([ "$rc" = 75 ] && [ -n "$n" ] && [ "$(cat "$tmp/ckP/latest")" = "step_$n" ] && [ -d "$tmp/ckP/step_$prev" ] &&
     grep -q "^zeroshard: saved .*/ckP/step_$prev$" "$tmp/pre.log") && echo 1 || echo 0) \
  "rc=$rc step '$n': $(ls -a "$tmp/ckP") $(grep -v '^step' "$tmp/pre.log" | tail -5)"

finish_cases
