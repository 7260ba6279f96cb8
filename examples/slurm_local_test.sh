#!/usr/bin/env bash
# train_gpt2 under a one-node Slurm (tools/slurm-local): srun --mpi=pmix
# starts 4 tasks as one MPI job of 4 ranks; 20 steps with checkpoints, then
# a resume continues bit for bit as an uninterrupted run; zeroshard run
# inside an allocation (it launches srun) restarts after a preemption signal
# (exit 75) and ends on the same weights; mpirun inside an allocation uses
# its slots. Slurm comes down on every exit.
# Needs root, slurm-wlm and munge, and no other Slurm on the machine; skips
# each case with the reason otherwise.
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
bin=$1 config=$2 corpus=$3 zeroshard=$4 slurm=$5
tmp=${TEST_TMPDIR:-$(mktemp -d)}
export PATH=$PATH:/usr/sbin:/sbin
# Ranks that wait in MPI yield: 4 of them share this machine's cores.
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl=self,vader
cases=(down_is_idempotent failed_up_cleans_after_itself up_shows_node_idle srun_has_pmix
  trains_20_steps_on_4_tasks resume_continues_bitwise mpirun_in_allocation_takes_its_slots
  zeroshard_run_in_allocation_resumes_after_preemption
  down_leaves_nothing)

# Slurm's daemons and step daemons that run (zombies not counted: they wait
# for init to reap them).
daemons() { ps -eo stat=,pid=,comm= | awk '$1 !~ /^Z/ && $3 ~ /^(munged|slurmctld|slurmd|slurmstepd)$/ { print $3 "(" $2 ")" }'; }

if ! reason=$("$slurm" check 2>&1); then
  for c in "${cases[@]}"; do skip_case "$c" "$reason"; done
  finish_cases
fi
# One such test at a time on this machine (from any worktree): the lock is
# held until the test exits.
mkdir -p /run/lock
exec 9>/run/lock/zeroshard-slurm-test.lock
if ! flock -n 9; then
  for c in "${cases[@]}"; do skip_case "$c" "another Slurm test runs on this machine (/run/lock/zeroshard-slurm-test.lock)"; done
  finish_cases
fi
if [ -e /run/zeroshard-slurm ] || [ -n "$(daemons)" ]; then
  for c in "${cases[@]}"; do
    skip_case "$c" "a Slurm is already up on this machine ($(daemons | tr '\n' ' ')); tools/slurm-local down"
  done
  finish_cases
fi

"$slurm" down >"$tmp/down0.log" 2>&1 && "$slurm" down >>"$tmp/down0.log" 2>&1
record_case down_is_idempotent $(($? == 0)) "$(cat "$tmp/down0.log")"

ZS_SLURM_UP_TIMEOUT_S=0 "$slurm" up >"$tmp/up_fail.log" 2>&1
rc=$?
left="$(daemons)$(ls -d /run/zeroshard-slurm 2>/dev/null)"
record_case failed_up_cleans_after_itself \
  $((rc == 1 && ${#left} == 0 && $(grep -c "up failed; stopped what it started" "$tmp/up_fail.log") == 1)) \
  "rc $rc; left: $left; $(head -3 "$tmp/up_fail.log")"

# Down on every exit from here, and only the Slurm this test brought up (a
# failed up has already taken itself down).
"$slurm" up >"$tmp/up.log" 2>&1 || { cat "$tmp/up.log"; exit 1; }
trap '"$slurm" down >/dev/null 2>&1' EXIT
export SLURM_CONF=/run/zeroshard-slurm/slurm.conf
node=$(sinfo -h -o '%N %T %c')
record_case up_shows_node_idle $([ "$node" = "$(hostname -s) idle 8" ] && echo 1 || echo 0) \
  "sinfo '$node', want '$(hostname -s) idle 8'"
mpis=$(srun --mpi=list 2>&1)
record_case srun_has_pmix $([[ "$mpis" == *pmix* ]] && echo 1 || echo 0) "$mpis"

common=(--config "$config" --set "data.train_path=$corpus" --set "data.val_path=$corpus" --set engine.parallel.dp=4
  --set engine.logging.interval=1 --set engine.checkpoint.interval=10)
on_slurm() {  # on_slurm NAME ARGS...  -> rc; log in $tmp/NAME.log
  local name=$1
  shift
  timeout 120 "$slurm" run --np 4 -- "$bin" "$@" >"$tmp/$name.log" 2>&1
  rc=$?
}
# same_losses A.jsonl B.jsonl STEPS: steps 1..STEPS with equal loss and grad
# norm (written round-trip exactly).
same_losses() {
  python3 - "$@" <<'PY'
import json, sys
rows = [[json.loads(l) for l in open(f)][1:] for f in sys.argv[1:3]]
key = lambda rs: [(r["step"], r["loss"], r["grad_norm"]) for r in rs]
a, b = key(rows[0]), key(rows[1])
print(f"{len(a)} vs {len(b)} steps; first difference: {next(((x, y) for x, y in zip(a, b) if x != y), None)}")
sys.exit(0 if [s for s, _, _ in a] == list(range(1, int(sys.argv[3]) + 1)) and a == b else 1)
PY
}

on_slurm first "${common[@]}" --steps 20 --set "engine.checkpoint.dir=$tmp/ckR" --set "engine.logging.metrics_path=$tmp/R.jsonl"
rc_f=$rc
world=$(python3 -c 'import json,sys; h=json.loads(open(sys.argv[1]).readline()); print(h["world_size"], h["hosts"], h["ranks_per_host"])' "$tmp/R.jsonl" 2>&1)
grep -q "^zeroshard: GPT-2 .* | world 4 = dp 4 x tp 1 x pp 1 | hosts 1 x 4 ranks | ZeRO stage 3 " "$tmp/first.log"
st_line=$?
ok=0
if [ $rc_f = 0 ] && [ $st_line = 0 ] && grep -q "^step    20/20 " "$tmp/first.log" && [ "$world" = "4 1 4" ] &&
  [ "$(cat "$tmp/ckR/latest" 2>/dev/null)" = step_20 ]; then ok=1; fi
record_case trains_20_steps_on_4_tasks $ok \
  "rc $rc_f line $st_line header (world hosts ranks_per_host) '$world' latest '$(cat "$tmp/ckR/latest" 2>/dev/null)': $(head -2 "$tmp/first.log"; tail -3 "$tmp/first.log")"

# The checkpoint at 20, copied before the resume writes beside it: the
# preemption case below starts from it too.
cp -r "$tmp/ckR" "$tmp/ckP" && cp "$tmp/R.jsonl" "$tmp/P.jsonl"
on_slurm resumed "${common[@]}" --steps 30 --resume --set "engine.checkpoint.dir=$tmp/ckR" \
  --set "engine.logging.metrics_path=$tmp/R.jsonl"
rc_r=$rc
on_slurm straight "${common[@]}" --steps 30 --set "engine.checkpoint.dir=$tmp/ckA" --set "engine.logging.metrics_path=$tmp/A.jsonl"
rc_a=$rc
"$zeroshard" ckpt diff "$tmp/ckA/step_30" "$tmp/ckR/step_30" --tol 0 >"$tmp/diff.log" 2>&1
st_diff=$?
cmp=$(same_losses "$tmp/A.jsonl" "$tmp/R.jsonl" 30 2>&1)
st=$?
record_case resume_continues_bitwise \
  $((rc_r == 0 && rc_a == 0 && st_diff == 0 && st == 0 && $(grep -c "^zeroshard: resumed from $tmp/ckR/step_20 at step 20$" "$tmp/resumed.log") == 1)) \
  "rc $rc_r/$rc_a diff $st_diff: $cmp $(tail -3 "$tmp/diff.log") $(tail -3 "$tmp/resumed.log")"

# mpirun inside an allocation, without -np: Open MPI's ras/slurm reads the
# allocation's 4 slots (no --oversubscribe on this 2-core machine).
root=()
if [ "$(id -u)" = 0 ]; then root=(--allow-run-as-root); fi
timeout 120 salloc -n 4 mpirun "${root[@]}" --bind-to none "$bin" "${common[@]}" --steps 2 >"$tmp/alloc_mpirun.log" 2>&1
rc=$?
grep -q "^zeroshard: GPT-2 .* | world 4 = dp 4 x tp 1 x pp 1 | hosts 1 x 4 ranks | " "$tmp/alloc_mpirun.log"
st_line=$?
record_case mpirun_in_allocation_takes_its_slots $((rc == 0 && st_line == 0)) \
  "rc $rc line $st_line: $(grep -v '^step' "$tmp/alloc_mpirun.log" | tail -8)"

# zeroshard run inside an allocation launches `srun -n 4` (MpiDefault=pmix).
# `scancel --signal=TERM` sends the job's tasks what `--signal=TERM@T` sends
# T seconds before the time limit; the trainer saves and exits 75, and the
# supervisor resumes in the same allocation.
timeout 150 salloc -n 4 -J zs-preempt "$zeroshard" run --np 4 -- "$bin" "${common[@]}" --steps 30 \
  --testing_slow_rank 0:200 --set "engine.checkpoint.dir=$tmp/ckP" --set "engine.logging.metrics_path=$tmp/P.jsonl" \
  >"$tmp/preempt.log" 2>&1 &
job=$!
signalled=0
for _ in $(seq 1 600); do
  if grep -q "^step    2[2-9]/30 " "$tmp/preempt.log" 2>/dev/null; then
    scancel --signal=TERM --name=zs-preempt && signalled=1
    break
  fi
  sleep 0.1
done
wait "$job"
rc_p=$?
"$zeroshard" ckpt diff "$tmp/ckA/step_30" "$tmp/ckP/step_30" --tol 0 >"$tmp/diff_p.log" 2>&1
st_diff=$?
cmp=$(same_losses "$tmp/A.jsonl" "$tmp/P.jsonl" 30 2>&1)
st=$?
restart=$(grep -c "^zeroshard run: restart 1/3 after exit code 75 (preempted) at step 2[2-9]; resuming from step 2[2-9] with dp 4$" "$tmp/preempt.log")
preempted=$(grep -c "^zeroshard: preempted at step 2[2-9] of 30; resume with --resume (exit 75)$" "$tmp/preempt.log")
record_case zeroshard_run_in_allocation_resumes_after_preemption \
  $((rc_p == 0 && signalled == 1 && st_diff == 0 && st == 0 && restart == 1 && preempted == 1)) \
  "rc $rc_p signalled $signalled diff $st_diff losses: $cmp; restart lines $restart preempted lines $preempted: $(grep -v '^step' "$tmp/preempt.log" | tail -12) $(tail -3 "$tmp/diff_p.log")"

"$slurm" down >"$tmp/down.log" 2>&1
rc=$?
trap - EXIT
left="$(daemons)$(ls -d /run/zeroshard-slurm 2>/dev/null)"
record_case down_leaves_nothing $((rc == 0 && ${#left} == 0)) "rc $rc; left: $left $(cat "$tmp/down.log")"
finish_cases
