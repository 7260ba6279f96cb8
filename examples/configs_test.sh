#!/usr/bin/env bash
# Every shipped config validates for the world size its header's mpirun line
# names (`mpirun -np N`), so the configs cannot rot as the schema changes.
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
zeroshard=$1
shift
for config in "$@"; do
  np=$(grep -o "mpirun -np [0-9]*" "$config" | head -1 | awk '{print $3}')
  if [ -z "$np" ]; then
    record_case "$(basename "$config")" 0 "$config: no 'mpirun -np N' line in its header comment"
    continue
  fi
  out=$("$zeroshard" check-config "$config" --world-size "$np" 2>&1)
  rc=$?
  record_case "$(basename "$config")" $((rc == 0)) "check-config --world-size $np exited $rc: $out"
done
finish_cases
