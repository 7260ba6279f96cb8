#!/usr/bin/env bash
# Long tier: `zeroshard run` of the tiny config, 300 steps at dp 4, under
# examples/fault_injector.py: 3 SIGKILLs (one right after corrupting the
# newest checkpoint), 1 SIGSTOP (the watchdog, 4 s, aborts the job), 1 full
# checkpoint filesystem (a 32 MiB tmpfs filled after a save: the next save
# fails) and 1 SIGTERM (the job saves and exits 75), at seeded steps. The
# run finishes, ends bitwise equal to the uninterrupted one, and the
# supervisor's log has one restart line per fault naming its cause, with at
# most interval + 1 steps lost (one interval more after the corruption).
# Rank 0 sleeps 30 ms a step (--testing_slow_rank) so the faults land
# mid-interval; it changes no number.
# Usage: zeroshard_run_fault_soak_test.sh TRAIN_GPT2 CONFIG CORPUS ZEROSHARD FAULT_INJECTOR
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
bin=$1 config=$2 corpus=$3 zeroshard=$4 injector=$5
tmp=${TEST_TMPDIR:-$(mktemp -d)}
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/mpirun_local.sh"
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/examples/fault_soak.sh"
# What mpirun_flags say, as environment for the mpirun zeroshard run starts.
export OMPI_MCA_btl=self,vader OMPI_MCA_hwloc_base_binding_policy=none OMPI_MCA_rmaps_base_oversubscribe=1

start=$(date +%s)
fault_soak full_soak 4 300 10 3 1 1 1 1 -- --config "$config" --set "data.train_path=$corpus" \
  --set "data.val_path=$corpus" --set eval_interval=0 --set data.batch_size=8 --set engine.checkpoint.keep_last=4 \
  --set engine.comm.timeout_s=4 --testing_slow_rank 0:30
echo "measured: full soak took $(($(date +%s) - start)) s (load $(cut -d' ' -f1-3 /proc/loadavg))"
finish_cases
