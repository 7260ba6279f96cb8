#!/usr/bin/env bash
# The guide's example trains its own model under mpirun and leaves a valid checkpoint.
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
bin=$1 corpus=$2 zeroshard=$3
tmp=${TEST_TMPDIR:-$(mktemp -d)}
cat >"$tmp/mlp.pbtxt" <<PB
model { n_layer: 2 n_head: 1 n_embd: 32 vocab_size: 256 seq_len: 32 }
data { train_path: "$corpus" batch_size: 8 }
steps: 40
engine {
  zero { stage: 3 }
  optimizer { lr: 3e-3 }
  parallel { dp: 2 }
  logging { trace_path: "$tmp/trace.json" trace_steps: 5 }
}
PB
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/mpirun_local.sh"
timeout 120 mpirun "${mpirun_flags[@]}" -np 2 "$bin" "$tmp/mlp.pbtxt" "$tmp/ckpt" >"$tmp/log" 2>&1
rc=$?
record_case trains_under_mpirun $((rc == 0)) "rc=$rc: $(tail -5 "$tmp/log")"
first=$(awk '/^step 10 /{print $4}' "$tmp/log")
last=$(awk '/^step 40 /{print $4}' "$tmp/log")
python3 -c "import sys; sys.exit(0 if float('$last') < 0.85 * float('$first') else 1)" 2>/dev/null
st=$?
record_case loss_falls $((st == 0)) "loss at step 10: '$first', at step 40: '$last'"
"$zeroshard" ckpt verify "$tmp/ckpt" >"$tmp/verify.log" 2>&1
st=$?
record_case checkpoint_verifies $((st == 0)) "$(cat "$tmp/verify.log")"
"$zeroshard" ckpt inspect "$tmp/ckpt" | grep -qE "^ +2 mlp\.1 +8352 elements, shard 4176, 4 parameters"
st=$?
record_case checkpoint_lists_user_units $((st == 0)) "$("$zeroshard" ckpt inspect "$tmp/ckpt" 2>&1 | head -20)"
"$zeroshard" trace "$tmp/trace.json" >"$tmp/trace.txt" 2>&1
st=$?
rows=$(grep -cE '^\| [01] \| 5 \| ' "$tmp/trace.txt")
grep -q '"name":"backward mlp.1"' "$tmp/trace.json"
has_unit=$?
record_case trace_of_the_users_units $((st == 0 && rows == 2 && has_unit == 0)) "rc=$st rows=$rows: $(cat "$tmp/trace.txt")"
finish_cases
