#!/usr/bin/env bash
# `zeroshard run` over a short soak on 2 ranks: the test kills a rank (its
# pid from a wrapper's pid file) once mid-run, then corrupts the newest
# checkpoint and kills a rank again. The supervised run restarts twice,
# logs both restarts, loses at most interval + 1 steps to the kill (one
# interval more to the corrupt checkpoint) and ends bitwise equal to the
# uninterrupted run. Also: zeroshard run's bad inputs, and giving up after
# --max-restarts.
# Usage: zeroshard_run_soak_test.sh TRAIN_GPT2 CONFIG CORPUS ZEROSHARD
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
bin=$1 config=$2 corpus=$3 zeroshard=$4
tmp=${TEST_TMPDIR:-$(mktemp -d)}
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/mpirun_local.sh"
# What mpirun_flags say, as environment for the mpirun zeroshard run starts.
export OMPI_MCA_btl=self,vader OMPI_MCA_hwloc_base_binding_policy=none OMPI_MCA_rmaps_base_oversubscribe=1
interval=4
# Widened (C 256, T 128) so that a step takes tens of milliseconds: the
# faults land mid-run.
common=(--config "$config" --set "data.train_path=$corpus" --set "data.val_path=$corpus" --set eval_interval=0
  --set steps=30 --set engine.checkpoint.interval=$interval --set engine.checkpoint.keep_last=3
  --set engine.logging.interval=1 --set model.n_embd=256 --set model.n_head=4 --set model.seq_len=128)

expect bad_input_missing_np 2 "zeroshard run: --np is required" -- "$zeroshard" run -- "$bin"
expect bad_input_min_np_above_np 2 "zeroshard run: --min-np 3 is above --np 2" -- \
  "$zeroshard" run --np 2 --min-np 3 -- "$bin" "${common[@]}"
expect bad_input_no_program 2 "zeroshard run: no trainer program after '--'" -- "$zeroshard" run --np 2 --

timeout 300 mpirun "${mpirun_flags[@]}" -np 2 "$bin" "${common[@]}" --set "engine.checkpoint.dir=$tmp/ckA" \
  >"$tmp/whole.log" 2>&1
rc_whole=$?

wrapper=$tmp/rank_wrapper.sh
cat >"$wrapper" <<'SH'
#!/usr/bin/env bash
echo $$ >"$ZS_PID_DIR/rank.${OMPI_COMM_WORLD_RANK:-0}.tmp" && mv "$ZS_PID_DIR/rank.${OMPI_COMM_WORLD_RANK:-0}.tmp" "$ZS_PID_DIR/rank.${OMPI_COMM_WORLD_RANK:-0}"
exec "$@"
SH
chmod +x "$wrapper"
export ZS_PID_DIR=$tmp/pids
mkdir -p "$ZS_PID_DIR"
ck=$tmp/ckB

latest_step() { sed -n 's/^step_\([0-9]*\)$/\1/p' "$ck/latest" 2>/dev/null; }
wait_for() {  # wait_for COMMAND...: up to 120 s
  for _ in $(seq 1 2400); do "$@" && return 0; sleep 0.05; done
  return 1
}
kill_rank1() { kill -9 "$(cat "$ZS_PID_DIR/rank.1")"; rm -f "$ZS_PID_DIR/rank.1"; }
faults() {
  wait_for test -d "$ck/step_8" && kill_rank1
  echo "killed rank 1 after step_8" >"$tmp/fault1"
  wait_for grep -q "zeroshard run: restart 1/" "$tmp/supervised.log"
  wait_for test -e "$ZS_PID_DIR/rank.1"
  wait_for sh -c "[ \"\$(sed -n 's/^step_\([0-9]*\)$/\1/p' '$ck/latest' 2>/dev/null)\" -ge 20 ] 2>/dev/null"
  local s
  s=$(latest_step)
  local f="$ck/step_$s/shard_pp000_dp00000_tp000.safetensors"
  printf '\x7f' | dd of="$f" bs=1 seek=$(($(stat -c %s "$f") - 8)) conv=notrunc status=none
  kill_rank1
  echo "$s" >"$tmp/corrupted_step"
}
faults &
faults_pid=$!
timeout 300 "$zeroshard" run --np 2 --max-restarts 3 -- "$wrapper" "$bin" "${common[@]}" \
  --set "engine.checkpoint.dir=$ck" >"$tmp/supervised.log" 2>&1
rc=$?
wait $faults_pid
corrupted=$(cat "$tmp/corrupted_step" 2>/dev/null || echo none)

# restart lines: "zeroshard run: restart N/R after CAUSE at step S; resuming from step K with dp D"
mapfile -t restarts < <(grep "^zeroshard run: restart " "$tmp/supervised.log")
report=$(python3 - "$interval" "$corrupted" "${restarts[@]}" <<'PY'
import re, sys
interval, corrupted, lines = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
pat = re.compile(r"^zeroshard run: restart (\d)/3 after rank 1 signal 9 \(Killed\) at step (\d+); resuming from step (\d+) with dp 2$")
ms = [pat.match(l) for l in lines]
ok = len(lines) == 2 and all(ms)
if ok:
    lost = [int(m.group(2)) - int(m.group(3)) for m in ms]
    ok = ([int(m.group(1)) for m in ms] == [1, 2] and 0 <= lost[0] <= interval + 1
          and 0 <= lost[1] <= 2 * interval + 1 and corrupted != "none" and int(ms[1].group(3)) < int(corrupted))
    print(f"steps lost {lost}, corrupted step {corrupted}")
else:
    print(f"restart lines {lines}")
sys.exit(0 if ok else 1)
PY
)
st=$?
record_case supervised_run_restarts_after_each_fault $((rc_whole == 0 && rc == 0 && st == 0)) \
  "rc $rc_whole $rc: $report $(grep -v '^step ' "$tmp/supervised.log" | tail -30)"
echo "measured: $report"
grep -q "zeroshard run: warning: checkpoint $ck/step_$corrupted fails verification: " "$tmp/supervised.log"
record_case corrupt_newest_checkpoint_is_passed_over $(($? == 0)) "$(grep warning "$tmp/supervised.log")"
"$zeroshard" ckpt diff "$tmp/ckA/step_30" "$ck/step_30" --tol 0 >"$tmp/diff.log" 2>&1
st=$?
record_case supervised_run_ends_bitwise_equal $((st == 0)) "diff rc $st: $(tail -5 "$tmp/diff.log")"

# A trainer that always fails: two restarts, then the last cause and exit 1.
failing=$tmp/fail.sh
printf '#!/usr/bin/env bash\nexit 75\n' >"$failing"
chmod +x "$failing"
timeout 120 "$zeroshard" run --np 2 --max-restarts 2 -- "$failing" "${common[@]}" \
  --set "engine.checkpoint.dir=$tmp/ckC" >"$tmp/giveup.log" 2>&1
rc=$?
n=$(grep -c "^zeroshard run: restart [12]/2 after \(rank [01] \)\?exit code 75 (preempted) at step unknown; resuming from step 0 with dp 2$" "$tmp/giveup.log")
grep -q "^zeroshard run: giving up after 2 restarts: last failure \(rank [01] \)\?exit code 75 (preempted) at step unknown$" "$tmp/giveup.log"
gave_up=$?
record_case gives_up_after_max_restarts $((rc == 1 && n == 2 && gave_up == 0)) "rc $rc n $n: $(cat "$tmp/giveup.log")"
finish_cases
