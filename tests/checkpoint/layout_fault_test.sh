#!/usr/bin/env bash
# Faults of a dp 2 x tp 2 x pp 2 checkpoint (8 ranks, 8 shard files):
#   * every manifest byte, every shard header byte and a seeded sample of
#     data bytes flipped in turn is caught by verify naming the file (and
#     the tensor), in-process (layout_check corrupt);
#   * a rank SIGKILLed before_shard_file, after_shard_file or before_commit
#     of the step-6 save leaves `latest` at step_5, which verifies and
#     resumes to step 10 bitwise as the uninterrupted run;
#   * a resume from a corrupt shard fails on all 8 ranks (DATA_LOSS: from
#     the step directory the reading rank names the file and tensor, from
#     the root rank 0's verification does), promptly.
# Usage: layout_fault_test.sh DRIVER CHECK ZEROSHARD
# The data seed (also the corruption sample's) is fixed and printed; ZS_TEST_SEED=random or =N
# (bazel --test_env) draws a fresh one or replays one.
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
driver=$1 check=$2 zeroshard=$3
tmp=${TEST_TMPDIR:-$(mktemp -d)}/layout_faults
rm -rf "$tmp" && mkdir -p "$tmp"
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/mpirun_local.sh"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
seed=$(test_seed layout_fault_test)
echo "data and corruption seed $seed (replay with --test_env=ZS_TEST_SEED=$seed)"
layout=2,2,2,3

run() {  # run LOG ARGS...: one 8-rank mpirun bounded to 60 s; sets rc
  local log=$1
  shift
  timeout 60 mpirun "${mpirun_flags[@]}" -np 8 "$driver" --seed "$seed" "$@" >"$log" 2>&1
  rc=$?
}
check() {  # check NAME CONDITION_STATUS MESSAGE
  if [ "$2" = 0 ]; then record_case "$1" 1; else record_case "$1" 0 "$3"; fi
}
cases_from() {  # cases_from OUTPUT RC: one case per "ok"/"FAIL" line of layout_check
  local line name
  while IFS= read -r line; do
    case $line in
      "ok "*) record_case "${line#ok }" 1 ;;
      "FAIL "*) name=${line#FAIL }; record_case "${name%%: *}" 0 "${name#*: }" ;;
      "info "*) echo "$line" ;;
    esac
  done <<<"$1"
  if [ "$2" != 0 ] && [ "$2" != 1 ]; then record_case "layout_check_exit" 0 "rc=$2: $(tail -5 <<<"$1")"; fi
}
losses() { grep "^job $2 loss " "$1" | sed -E 's/^.*step=([0-9]+) bits=([0-9a-f]+) .*$/\1 \2/'; }

# The uninterrupted run (10 steps) and the checkpoint at step 5.
start=$SECONDS
run "$tmp/ref.log" "$layout:$tmp/straight:10" "$layout:$tmp/half:5"
check reference_runs $rc "rc=$rc: $(tail -10 "$tmp/ref.log")"

# Corruption, in-process: every manifest and header byte, 2000 data bytes.
t=$SECONDS
out=$("$check" corrupt "$tmp/half" "$seed" 2000 2>&1)
cases_from "$out" $?
echo "corruption checks: $((SECONDS - t)) s"

# A rank killed at each phase of the step-6 save (rank 0 commits).
# World rank 5 is (pp 1, dp 0, tp 1), rank 2 (pp 0, dp 1, tp 0).
for case in "5 before_shard_file shard_pp001_dp00000_tp001" "2 after_shard_file shard_pp000_dp00001_tp000" \
    "0 before_commit manifest"; do
  set -- $case
  rank=$1 phase=$2 marker=$3 root=$tmp/killed_$2
  cp -r "$tmp/half" "$root"
  t=$SECONDS
  run "$tmp/kill_$phase.log" --kill "$rank:6:$phase" "$layout:$root:6:$root"
  [ "$rc" != 0 ] && [ "$rc" != 124 ]
  check "killed_${phase}_job_failed" $? "rc=$rc after $((SECONDS - t)) s; $(tail -5 "$tmp/kill_$phase.log")"
  # The save was cut where intended: the killed rank's file not yet
  # written (before_shard_file), written (after_shard_file), or every
  # file and the manifest written (before_commit).
  saved=$(cd "$root"/.tmp_step_6_* 2>/dev/null && ls)
  [ -d "$(echo "$root"/.tmp_step_6_*)" ] && case $phase in
    before_shard_file) ! grep -q "^$marker" <<<"$saved" ;;
    after_shard_file) grep -q "^$marker.safetensors$" <<<"$saved" ;;
    before_commit) [ "$(grep -c '^shard_.*\.safetensors$' <<<"$saved")" = 8 ] && grep -q '^manifest.pbtxt$' <<<"$saved" ;;
  esac
  check "killed_${phase}_left_the_save_in_progress" $? "$(ls -a "$root"): $saved"
  [ "$(cat "$root/latest" 2>/dev/null)" = step_5 ] && [ ! -e "$root/step_6" ] && \
    grep -q '^job 0 loss step=6 ' "$tmp/kill_$phase.log"
  check "killed_${phase}_latest_is_step_5" $? "latest=$(cat "$root/latest" 2>/dev/null); $(ls -a "$root")"
  out=$("$zeroshard" ckpt verify "$root" 2>&1)
  check "killed_${phase}_step_5_verifies" $? "$out"
done

# One job resumes all three to step 10: bitwise the uninterrupted run.
run "$tmp/resume.log" "$layout:$tmp/killed_before_shard_file:10:$tmp/killed_before_shard_file" \
  "$layout:$tmp/killed_after_shard_file:10:$tmp/killed_after_shard_file" \
  "$layout:$tmp/killed_before_commit:10:$tmp/killed_before_commit"
check resume_job $rc "rc=$rc: $(tail -10 "$tmp/resume.log")"
j=0
for phase in before_shard_file after_shard_file before_commit; do
  root=$tmp/killed_$phase
  grep -q "^job $j resumed from step 5 (saved at dp 2 tp 2 pp 2)$" "$tmp/resume.log" && \
    diff <(losses "$tmp/ref.log" 0 | sed -n '6,10p') <(losses "$tmp/resume.log" $j) >/dev/null
  check "killed_${phase}_resumes_with_the_same_losses" $? \
    "$(diff <(losses "$tmp/ref.log" 0) <(losses "$tmp/resume.log" $j))"
  out=$("$check" same "$tmp/straight" "$root" "$tmp/work" 2>&1)
  cases_from "$out" $?
  [ "$(cat "$root/latest")" = step_10 ] && [ -z "$(ls -a "$root" | grep '^\.tmp_step_')" ]
  check "killed_${phase}_saved_step_10_and_pruned_the_abandoned_save" $? "latest=$(cat "$root/latest"); $(ls -a "$root")"
  j=$((j + 1))
done

# A resume from a corrupt shard (one data byte of stage 1's dp 1 tp 0
# file, world rank 6) fails on every rank: from the step directory, rank 6
# names what it read; from the root, rank 0's verification does.
root=$tmp/corrupt
cp -r "$tmp/half" "$root"
file=$root/step_5/shard_pp001_dp00001_tp000.safetensors
header=$(python3 -c 'import struct,sys; print(struct.unpack("<Q", open(sys.argv[1],"rb").read(8))[0])' "$file")
python3 - "$file" $((8 + header + 5)) <<'PY'
import sys
path, at = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ 0xFF]))
PY
t=$SECONDS
run "$tmp/corrupt.log" "$layout:$root:10:$root/step_5"
elapsed=$((SECONDS - t))
[ "$rc" = 1 ] && [ "$elapsed" -lt 30 ]
check corrupt_resume_fails_promptly $? "rc=$rc after $elapsed s; $(tail -10 "$tmp/corrupt.log")"
n=$(grep -c '^\[rank [0-7]\] error: DATA_LOSS: ' "$tmp/corrupt.log")
missing=""
for r in 0 1 2 3 4 5 6 7; do grep -q "^\[rank $r\] error: DATA_LOSS: " "$tmp/corrupt.log" || missing+=" $r"; done
[ "$n" = 8 ] && [ -z "$missing" ]
check corrupt_resume_fails_on_every_rank $? "ranks without a DATA_LOSS error:$missing; $(grep error "$tmp/corrupt.log")"
grep -q "^\[rank 6\] error: DATA_LOSS: '$file': tensor 'unit\.[0-9]*\.master' has crc32c" "$tmp/corrupt.log"
check corrupt_resume_names_the_file_and_tensor $? "$(grep error "$tmp/corrupt.log")"
[ "$(grep -c "^\[rank [0-7]\] error: DATA_LOSS: .*failed on world rank 6 (see its error)" "$tmp/corrupt.log")" = 7 ]
check corrupt_resume_other_ranks_name_rank_6 $? "$(grep error "$tmp/corrupt.log")"
! grep -q '^job 0 loss' "$tmp/corrupt.log"
check corrupt_resume_trains_no_step $? "$(grep loss "$tmp/corrupt.log")"
# Given the root, rank 0 verifies before any rank reads: with no earlier
# step to fall back to, every rank reports its verdict naming file and tensor.
run "$tmp/corrupt_root.log" "$layout:$root:10:$root"
[ "$rc" = 1 ]
check corrupt_root_resume_fails $? "rc=$rc; $(tail -10 "$tmp/corrupt_root.log")"
[ "$(grep -c "^\[rank [0-7]\] error: DATA_LOSS: choosing the checkpoint to resume from failed on world rank 0: no checkpoint under '$root' verifies: .*'$file': tensor 'unit\.[0-9]*\.master' .*has crc32c" "$tmp/corrupt_root.log")" = 8 ]
check corrupt_root_resume_names_the_file_and_tensor_on_every_rank $? "$(grep error "$tmp/corrupt_root.log")"
echo "total: $((SECONDS - start)) s"
finish_cases
