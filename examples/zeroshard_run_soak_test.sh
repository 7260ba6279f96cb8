#!/usr/bin/env bash
# `zeroshard run` over a short soak on 2 ranks (60 steps, interval 3) under
# examples/fault_injector.py, one fault of each kind at seeded steps: two
# SIGKILLs, one right after corrupting the newest checkpoint; a SIGSTOP (the
# watchdog, 3 s, aborts the job); a full checkpoint filesystem (a tmpfs,
# root only, else skipped visibly); a SIGTERM (the job saves and exits 75).
# The supervised run restarts once per fault, names each cause, loses at
# most interval + 1 steps to each (one interval more to the corruption) and
# ends bitwise equal to the uninterrupted run. Rank 0 sleeps 40 ms a step
# (--testing_slow_rank, no number changes) so the faults land mid-interval.
# Also: zeroshard run's bad inputs, and giving up after --max-restarts.
# Usage: zeroshard_run_soak_test.sh TRAIN_GPT2 CONFIG CORPUS ZEROSHARD FAULT_INJECTOR
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
bin=$1 config=$2 corpus=$3 zeroshard=$4 injector=$5
tmp=${TEST_TMPDIR:-$(mktemp -d)}
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/mpirun_local.sh"
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/examples/fault_soak.sh"
# What mpirun_flags say, as environment for the mpirun zeroshard run starts.
export OMPI_MCA_btl=self,vader OMPI_MCA_hwloc_base_binding_policy=none OMPI_MCA_rmaps_base_oversubscribe=1
common=(--config "$config" --set "data.train_path=$corpus" --set "data.val_path=$corpus" --set eval_interval=0
  --set engine.checkpoint.keep_last=4)

expect bad_input_missing_np 2 "zeroshard run: --np is required" -- "$zeroshard" run -- "$bin"
expect bad_input_min_np_above_np 2 "zeroshard run: --min-np 3 is above --np 2" -- \
  "$zeroshard" run --np 2 --min-np 3 -- "$bin" "${common[@]}"
expect bad_input_no_program 2 "zeroshard run: no trainer program after '--'" -- "$zeroshard" run --np 2 --

start=$(date +%s)
fault_soak supervised_run 2 60 3 2 1 1 1 1 -- "${common[@]}" --set engine.comm.timeout_s=3 \
  --testing_slow_rank 0:40
echo "measured: the short soak took $(($(date +%s) - start)) s (load $(cut -d' ' -f1-3 /proc/loadavg))"

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
