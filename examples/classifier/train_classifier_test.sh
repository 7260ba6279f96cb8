#!/usr/bin/env bash
# train_classifier under mpirun -np 3 with the shipped config: the progress
# and final lines, and errors printed once with exit status 2.
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
bin=$1 config=$2
tmp=${TEST_TMPDIR:-$(mktemp -d)}
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/mpirun_local.sh"
run() {  # run OUT ERR ARGS...: train_classifier on 3 ranks
  local out=$1 err=$2
  shift 2
  timeout 120 mpirun "${mpirun_flags[@]}" -np 3 "$bin" "$@" >"$out" 2>"$err"
}

run "$tmp/out" "$tmp/err" --config "$config" --steps 5 --set engine.logging.interval=2
rc=$?
record_case trains_under_mpirun $((rc == 0)) "rc=$rc: $(tail -5 "$tmp/out") $(tail -5 "$tmp/err")"
grep -qE '^step 1/5 .*\| loss [0-9]+\.[0-9]{4} ' "$tmp/out"
record_case step_1_line $(($? == 0)) "$(cat "$tmp/out")"
steps=$(grep -oE '^step [0-9]+' "$tmp/out" | awk '{printf "%s ", $2}')
record_case steps_logged $([ "$steps" = "1 2 4 5 " ] && echo 1 || echo 0) "logged steps '$steps', want '1 2 4 5 '"
tail -2 "$tmp/out" >"$tmp/last2"
head -1 "$tmp/last2" | grep -qE '^final loss [0-9]+\.[0-9]{4}$' && tail -1 "$tmp/last2" | grep -qE '^accuracy [0-9]\.[0-9]{4}$'
record_case final_two_lines $(($? == 0)) "last two lines: $(cat "$tmp/last2")"
final=$(awk '/^final loss /{print $3}' "$tmp/out")
step5=$(grep -E '^step 5/5 ' "$tmp/out" | grep -oE 'loss [0-9.]+' | awk '{print $2}')
accuracy=$(awk '/^accuracy /{print $2}' "$tmp/out")
python3 -c "import sys; sys.exit(0 if '$final' == '$step5' and 0 <= float('$accuracy') <= 1 else 1)" 2>/dev/null
record_case final_loss_is_the_last_steps $(($? == 0)) "final loss '$final', step 5 loss '$step5', accuracy '$accuracy'"

printf 'model { n_layer: 1 }\ndata { train_path: "x.bin" batch_size: 3 }\nengine { parallel { dp: 3 } }\n' >"$tmp/gpt2.pbtxt"
run "$tmp/out" "$tmp/err" --config "$tmp/gpt2.pbtxt"
rc=$?
n=$(grep -c "has no '# proto-message:' header, so it is a zeroshard.TrainConfig, but this program reads a zeroshard.ClassifierTrainConfig" "$tmp/err")
record_case gpt2_config_refused_once $((rc == 2 && n == 1)) "rc=$rc, printed $n times: $(cat "$tmp/err")"

run "$tmp/out" "$tmp/err" --config "$config" --set engine.parallel.dp=2
rc=$?
n=$(grep -c "engine.parallel: dp\*tp\*pp = 2 but the world has 3 ranks" "$tmp/err")
record_case invalid_config_once $((rc == 2 && n == 1)) "rc=$rc, printed $n times: $(cat "$tmp/err")"

run "$tmp/out" "$tmp/err" --config "$config" --steps many
rc=$?
n=$(grep -c "train_classifier: --steps: expected a non-negative integer, got 'many'" "$tmp/err")
record_case bad_flag_once $((rc == 2 && n == 1)) "rc=$rc, printed $n times: $(cat "$tmp/err")"
finish_cases
