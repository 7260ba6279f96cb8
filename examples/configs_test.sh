#!/usr/bin/env bash
# Every shipped config validates for the world size its header's mpirun line
# names (`mpirun -np N`), so the configs cannot rot as the schema changes,
# and is of the kind the program on that line reads (its '# proto-message:'
# header: train_gpt2 reads GPT-2 configs, train_classifier classifier ones).
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
zeroshard=$1
shift
for config in "$@"; do
  line=$(grep -o "mpirun -np [0-9]* [^ ]*" "$config" | head -1)
  np=$(echo "$line" | awk '{print $3}')
  if [ -z "$np" ]; then
    record_case "$(basename "$config")" 0 "$config: no 'mpirun -np N' line in its header comment"
    continue
  fi
  case "$(basename "$(echo "$line" | awk '{print $4}')")" in
    train_gpt2) kind=gpt2 ;;
    train_classifier) kind=classifier ;;
    *) kind=unknown ;;
  esac
  out=$("$zeroshard" check-config "$config" --world-size "$np" 2>&1)
  rc=$?
  ok=$((rc == 0))
  if [ $ok = 1 ] && ! grep -q "^kind       $kind " <<<"$out"; then ok=0; fi
  record_case "$(basename "$config")" $ok "check-config --world-size $np exited $rc (want kind $kind for '$line'): $out"
done
finish_cases
