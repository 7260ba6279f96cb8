#!/usr/bin/env bash
# A rank killed (SIGKILL) during a save leaves the previous checkpoint and
# `latest` intact and loadable; a new mpirun job resumes from it and ends with
# bitwise the weights and losses of an uninterrupted run.
# Usage: checkpoint_kill_test.sh DRIVER ZEROSHARD
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
driver=$1 zeroshard=$2
tmp=${TEST_TMPDIR:-$(mktemp -d)}/ckpt_kill
rm -rf "$tmp" && mkdir -p "$tmp"
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/mpirun_local.sh"
run() {  # run NP LOG ARGS...: mpirun bounded to 60 s; returns mpirun's status
  local np=$1 log=$2
  shift 2
  timeout 60 mpirun "${mpirun_flags[@]}" -np "$np" "$driver" "$@" >"$log" 2>&1
}
check() {  # check NAME CONDITION_STATUS MESSAGE
  if [ "$2" = 0 ]; then record_case "$1" 1; else record_case "$1" 0 "$3"; fi
}

# The uninterrupted reference: 6 steps at dp 3, saving every 3.
run 3 "$tmp/ref.log" train "$tmp/ref" 6 3
check reference_run $? "$(cat "$tmp/ref.log")"
want=$(grep '^final' "$tmp/ref.log")

for case in "1 after_shard_file" "2 before_shard_file" "0 before_commit"; do
  set -- $case
  rank=$1 phase=$2
  root=$tmp/killed_$phase
  run 3 "$tmp/kill_$phase.log" train "$root" 6 3 "$rank" 6 "$phase"
  rc=$?
  [ "$rc" != 0 ] && [ "$rc" != 124 ]
  check "killed_${phase}_job_failed" $? "rc=$rc; $(tail -5 "$tmp/kill_$phase.log")"
  [ "$(cat "$root/latest" 2>/dev/null)" = "step_3" ] && [ ! -e "$root/step_6" ]
  check "killed_${phase}_latest_is_step_3" $? "latest=$(cat "$root/latest" 2>/dev/null); $(ls -a "$root")"
  out=$("$zeroshard" ckpt verify "$root" 2>&1)
  check "killed_${phase}_verify" $? "$out"
  run 3 "$tmp/resume_$phase.log" resume "$root" 6 3
  rc=$?
  got=$(grep '^final' "$tmp/resume_$phase.log")
  [ "$rc" = 0 ] && grep -q '^resumed from step 3 (saved at dp 3)$' "$tmp/resume_$phase.log" && [ "$got" = "$want" ]
  check "killed_${phase}_resume_bitwise" $? "rc=$rc; got '$got', want '$want'; $(tail -5 "$tmp/resume_$phase.log")"
  diff <(grep '^loss step=[456] ' "$tmp/ref.log") <(grep '^loss step=' "$tmp/resume_$phase.log") >/dev/null
  check "killed_${phase}_losses_bitwise" $? "$(grep '^loss' "$tmp/ref.log" "$tmp/resume_$phase.log")"
  [ "$(cat "$root/latest")" = "step_6" ]
  check "killed_${phase}_resumed_job_saved_step_6" $? "latest=$(cat "$root/latest")"
done

# A new job of another size resumes from the surviving checkpoint too.
cp -r "$tmp/killed_after_shard_file" "$tmp/to_dp2"
echo step_3 > "$tmp/to_dp2/latest.tmp" && mv "$tmp/to_dp2/latest.tmp" "$tmp/to_dp2/latest"
run 2 "$tmp/resume_dp2.log" resume "$tmp/to_dp2" 6 0
rc=$?
[ "$rc" = 0 ] && grep -q '^resumed from step 3 (saved at dp 3)$' "$tmp/resume_dp2.log" && grep -q '^final step=6' "$tmp/resume_dp2.log"
check resume_at_dp2 $? "rc=$rc; $(tail -5 "$tmp/resume_dp2.log")"
finish_cases
