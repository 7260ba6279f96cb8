#!/usr/bin/env bash
# A data link cut under train_gpt2 on a cluster of two network-namespace
# hosts x 2 ranks (tools/cluster): once a checkpoint is committed zs-h1's
# data link goes down; the watchdog (engine.comm.timeout_s) ends the job
# non-zero with a line naming the collective, the reporting rank and the
# ranks and host on the other side of the cut; the committed checkpoint
# verifies and a fresh cluster resumes from it. The cluster always comes
# down. Needs root with CAP_NET_ADMIN; skips each case with the reason
# otherwise.
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
bin=$1 config=$2 corpus=$3 zeroshard=$4 cluster=$5
tmp=${TEST_TMPDIR:-$(mktemp -d)}
timeout_s=3
cases=(checkpoint_committed_then_link_cut job_fails_within_the_watchdogs_time watchdog_names_collective_rank_and_host
  committed_checkpoint_verifies resumes_on_a_fresh_cluster slow_link_shows_as_waits_not_compute)

source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/cluster_test_guard.sh"
skip_unless_cluster_free "$cluster" "${cases[@]}"

trap '"$cluster" down >/dev/null 2>&1' EXIT
"$cluster" up --hosts 2 --slots 2 --link 1gbit >"$tmp/up.log" 2>&1 || { cat "$tmp/up.log"; exit 1; }

# Rank 0 sleeps 100 ms per step so the run is still going when the link goes.
base=(--config "$config" --set "data.train_path=$corpus" --set "data.val_path=$corpus" --set engine.parallel.dp=4
  --set engine.logging.interval=1 --set data.batch_size=8)
common=("${base[@]}" --set "engine.checkpoint.dir=$tmp/ck" --set engine.checkpoint.interval=2
  --set "engine.comm.timeout_s=$timeout_s")
log=$tmp/cut.log
timeout 120 "$cluster" run --np 4 -- "$bin" "${common[@]}" --steps 400 --testing_slow_rank 0:100 >"$log" 2>&1 &
job=$!
saved=0
for _ in $(seq 1 1200); do
  if grep -q "^zeroshard: saved .*/ck/step_2$" "$log"; then
    saved=1
    break
  fi
  kill -0 "$job" 2>/dev/null || break
  sleep 0.05
done
"$cluster" cut zs-h1 >"$tmp/cutcmd.log" 2>&1
cut=$?
cut_ms=$(date +%s%3N)
wait "$job"
rc=$?
elapsed_ms=$(($(date +%s%3N) - cut_ms))
echo "--- job exited $rc, ${elapsed_ms} ms after the cut; output:"
cat "$log"
echo "---"
record_case checkpoint_committed_then_link_cut $((saved == 1 && cut == 0)) "saved=$saved cut rc=$cut $(cat "$tmp/cutcmd.log")"
# Within timeout + the watchdog's period and peer query (~1.3 x) plus a step
# and a checkpoint that may still be in flight at the cut.
record_case job_fails_within_the_watchdogs_time $((rc != 0 && rc != 124 && elapsed_ms < 4 * timeout_s * 1000)) \
  "rc $rc after ${elapsed_ms} ms (want non-zero within $((4 * timeout_s)) s)"

# The ranks on zs-h0 survive the cut (those on zs-h1 may end first with
# Open MPI's own error: their new connections are unreachable). Each of them
# prints the watchdog's line naming the collective, itself and the ranks
# across the cut with their host (zs-h0 holds ranks 0,1, zs-h1 ranks 2,3);
# a line from zs-h1 names zs-h0's ranks.
coll='collective #[0-9]+ [A-Za-z]+\([^)]*\) in group [a-z_.]+ did not finish within 3s; '
far0='(ranks that never arrived: 2,3 on zs-h1|ranks 2,3 on zs-h1 did not answer \(dead or stuck\))'
far1='(ranks that never arrived: 0,1 on zs-h0|ranks 0,1 on zs-h0 did not answer \(dead or stuck\))'
lines=$(grep -c 'did not finish within' "$log")
good=$(grep -cE "^\[rank [01]\] zeroshard: $coll(.*; )?$far0; aborting the job$|^\[rank [23]\] zeroshard: $coll(.*; )?$far1; aborting the job$" "$log")
r0=$(grep -cE "^\[rank 0\] zeroshard: $coll" "$log") r1=$(grep -cE "^\[rank 1\] zeroshard: $coll" "$log")
record_case watchdog_names_collective_rank_and_host $((good == lines && r0 == 1 && r1 == 1)) \
  "$good of $lines watchdog lines name the far side's ranks and host; rank 0 $r0, rank 1 $r1 (want 1 each): $(grep 'did not finish within' "$log")"

last=$(grep -o "^zeroshard: saved .*/ck/step_[0-9]*$" "$log" | tail -1 | sed 's/^zeroshard: saved //')
last_step=${last##*step_}
expect committed_checkpoint_verifies 0 "" -- "$zeroshard" ckpt verify "${last:-$tmp/ck/none}"

"$cluster" down >"$tmp/down.log" 2>&1 && "$cluster" up --hosts 2 --slots 2 --link 1gbit >"$tmp/up2.log" 2>&1
fresh=$?
timeout 120 "$cluster" run --np 4 -- "$bin" "${common[@]}" --steps $((${last_step:-0} + 2)) --resume \
  >"$tmp/resume.log" 2>&1
rc=$?
grep -qx "zeroshard: resumed from $last at step $last_step" "$tmp/resume.log"
st=$?
record_case resumes_on_a_fresh_cluster $((fresh == 0 && rc == 0 && st == 0)) \
  "fresh cluster $fresh, rc $rc, want 'zeroshard: resumed from $last at step $last_step': $(tail -5 "$tmp/resume.log")"

# Links at 100mbit, zs-h1's cut to 10mbit once step 30 is done; every step
# is a logging step, so each row carries the straggler report.
"$cluster" slow zs-h0 100mbit >/dev/null && "$cluster" slow zs-h1 100mbit >/dev/null
slow_log=$tmp/slow.log
timeout 180 "$cluster" run --np 4 -- "$bin" "${base[@]}" --steps 80 \
  --set "engine.logging.metrics_path=$tmp/slow.jsonl" >"$slow_log" 2>&1 &
job=$!
for _ in $(seq 1 1200); do
  grep -q "step    30/80" "$slow_log" && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.05
done
"$cluster" slow zs-h1 10mbit >"$tmp/slowcmd.log" 2>&1
slowed=$?
slowed_at=$(grep -o "step *[0-9]*/80" "$slow_log" | tail -1 | sed 's/^step *//; s/\/80$//')
wait "$job"
rc=$?
# Before: steps 5..slowed_at; after: from two steps past the cut. Step time
# must grow at least 3x and the median rank's compute account for under a
# fifth of the growth.
cmp=$(python3 - "$tmp/slow.jsonl" "${slowed_at:-0}" <<'PY'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])][1:]
cut = int(sys.argv[2])
before = [r for r in rows if 5 <= r["step"] <= cut]
after = [r for r in rows if r["step"] >= cut + 3]
if len(before) < 5 or len(after) < 10:
    print(f"too few steps: {len(before)} before, {len(after)} after the slow-down at step {cut}"); sys.exit(1)
m = lambda rs, f: st.median(f(r) for r in rs)
step_b, step_a = m(before, lambda r: r["step_ms"]), m(after, lambda r: r["step_ms"])
comp_b, comp_a = m(before, lambda r: r["straggler"]["median_ms"]), m(after, lambda r: r["straggler"]["median_ms"])
print(f"slowed after step {cut}: step_ms median {step_b:.1f} -> {step_a:.1f}, compute (straggler median_ms) {comp_b:.1f} -> {comp_a:.1f}")
sys.exit(0 if step_a >= 3 * step_b and comp_a - comp_b < 0.2 * (step_a - step_b) else 1)
PY
)
st=$?
echo "$cmp"
record_case slow_link_shows_as_waits_not_compute $((rc == 0 && slowed == 0 && st == 0)) "rc $rc slow rc $slowed: $cmp"
finish_cases
