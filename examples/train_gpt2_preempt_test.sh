#!/usr/bin/env bash
# Preemption of train_gpt2 under mpirun (docs/resilience.md): SIGTERM on one
# rank makes every rank save at the next step boundary and exit 75; resuming
# continues bit for bit; a deadline that passes first exits 1, latest untouched.
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
bin=$1 config=$2 corpus=$3 zeroshard=$4
tmp=${TEST_TMPDIR:-$(mktemp -d)}
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/mpirun_local.sh"
common=(--config "$config" --set "data.train_path=$corpus" --set "data.val_path=$corpus" --set steps=60
        --set engine.logging.interval=1)

# start_signalled NAME SIGNAL RANK ARGS...: a 2-rank job of 60 slowed steps;
# once rank 0 printed step 3, RANK gets SIGNAL. Sets rc; log in $tmp/NAME.log.
start_signalled() {
  local name=$1 sig=$2 target=$3
  shift 3
  rm -f "$tmp/$name.pid."*
  # Each rank writes its pid, then becomes train_gpt2 (exec keeps the pid).
  timeout 300 mpirun "${mpirun_flags[@]}" -np 2 sh -c 'echo $$ > "$0.$OMPI_COMM_WORLD_RANK"; exec "$@"' \
    "$tmp/$name.pid" "$bin" "${common[@]}" --testing_slow_rank 0:100 "$@" >"$tmp/$name.log" 2>&1 &
  local job=$!
  for _ in $(seq 1 600); do
    grep -q "step     3/60" "$tmp/$name.log" 2>/dev/null && [ -s "$tmp/$name.pid.$target" ] && break
    sleep 0.1
  done
  kill "-$sig" "$(cat "$tmp/$name.pid.$target")"
  wait "$job"
  rc=$?
}

start_signalled preempted TERM 1 --set "engine.checkpoint.dir=$tmp/ckP" --set "engine.logging.metrics_path=$tmp/P.jsonl"
n=$(sed -n 's/^zeroshard: preempted at step \([0-9]*\) of 60; resume with --resume (exit 75)$/\1/p' "$tmp/preempted.log")
latest=$(cat "$tmp/ckP/latest" 2>/dev/null)
record_case sigterm_on_one_rank_saves_and_exits_75 $((rc == 75)) "rc=$rc: $(tail -5 "$tmp/preempted.log")"
record_case preempted_step_is_latest $(([ -n "$n" ] && [ "$n" -ge 3 ] && [ "$n" -lt 60 ] && [ "$latest" = "step_$n" ]) && echo 1 || echo 0) \
  "step '$n', latest '$latest': $(tail -3 "$tmp/preempted.log")"
n=${n:-3}
end=$((n + 3))

# The preempted job resumed to n+3 == one job of n+3 steps, bit for bit.
timeout 300 mpirun "${mpirun_flags[@]}" -np 2 "$bin" "${common[@]}" --steps "$end" --resume \
  --set "engine.checkpoint.dir=$tmp/ckP" --set "engine.logging.metrics_path=$tmp/P.jsonl" >"$tmp/resumed.log" 2>&1
rc_r=$?
timeout 300 mpirun "${mpirun_flags[@]}" -np 2 "$bin" "${common[@]}" --steps "$end" \
  --set "engine.checkpoint.dir=$tmp/ckA" --set "engine.logging.metrics_path=$tmp/A.jsonl" >"$tmp/straight.log" 2>&1
rc_a=$?
"$zeroshard" ckpt diff "$tmp/ckA" "$tmp/ckP" --tol 0 >"$tmp/diff.log" 2>&1
st_diff=$?
python3 - "$tmp/A.jsonl" "$tmp/P.jsonl" "$end" <<'PY'
import json, sys
a, p = ([json.loads(l) for l in open(f)][1:] for f in sys.argv[1:3])
end = int(sys.argv[3])
ok = [r['step'] for r in a] == list(range(1, end + 1)) and [r['step'] for r in p] == list(range(1, end + 1)) \
    and [r['loss'] for r in a] == [r['loss'] for r in p] and [r['grad_norm'] for r in a] == [r['grad_norm'] for r in p]
sys.exit(0 if ok else 1)
PY
st_json=$?
record_case resume_after_preemption_continues_bit_for_bit \
  $((rc_r == 0 && rc_a == 0 && st_diff == 0 && st_json == 0)) \
  "rc $rc_r/$rc_a diff $st_diff json $st_json: $(tail -3 "$tmp/diff.log") $(tail -3 "$tmp/resumed.log")"

# SIGUSR1 on rank 0 with a deadline no save meets: exit 1 naming it; the
# step is not committed and latest still names an earlier interval save.
start_signalled late USR1 0 --set "engine.checkpoint.dir=$tmp/ckL" --set engine.checkpoint.interval=2 \
  --set engine.checkpoint.preempt_deadline_s=1e-9
k=$(sed -n 's/.*engine.checkpoint.preempt_deadline_s = 1e-09 s passed before the preemption checkpoint of step \([0-9]*\) committed; latest is untouched$/\1/p' "$tmp/late.log" | head -1)
latest=$(cat "$tmp/ckL/latest" 2>/dev/null)
record_case missed_deadline_exits_1_latest_untouched \
  $(([ "$rc" = 1 ] && [ -n "$k" ] && [ ! -e "$tmp/ckL/step_$k" ] && [ -n "$latest" ] && [ "${latest#step_}" -lt "$k" ]) && echo 1 || echo 0) \
  "rc=$rc step '$k' latest '$latest': $(ls -a "$tmp/ckL") $(tail -5 "$tmp/late.log")"

finish_cases
