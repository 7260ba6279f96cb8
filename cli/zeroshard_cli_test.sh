#!/usr/bin/env bash
# End-to-end checks of the zeroshard binary: exit codes and messages.
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
bin=$1
tmp=${TEST_TMPDIR:-$(mktemp -d)}
cat > "$tmp/good.pbtxt" <<'PB'
model { n_layer: 2 n_head: 2 n_embd: 32 vocab_size: 256 seq_len: 16 }
data { train_path: "train.bin" batch_size: 8 }
engine { parallel { dp: 4 } zero { stage: 3 } }
PB
printf 'model {\n  n_layer: two\n}\n' > "$tmp/syntax.pbtxt"
cat > "$tmp/classifier.pbtxt" <<'PB'
# proto-message: zeroshard.ClassifierTrainConfig
model { input_dim: 4 projection_dim: 8 hidden: 6 num_classes: 3 }
data { batch_size: 12 }
engine { parallel { dp: 3 } zero { stage: 3 } }
PB
printf '# proto-message: zeroshard.RegressionConfig\nsteps: 1\n' > "$tmp/unknown_kind.pbtxt"

expect help 0 "check-config" -- "$bin" --help
expect no_args 2 "usage: zeroshard SUBCOMMAND" -- "$bin"
expect help_sub 0 "usage: zeroshard check-config FILE" -- "$bin" help check-config
expect unknown_sub 2 "zeroshard: no subcommand 'frobnicate'" -- "$bin" frobnicate
expect valid 0 "valid config for 4 ranks" -- "$bin" check-config "$tmp/good.pbtxt" --world-size 4
expect normalized 0 "stage: 3" -- "$bin" check-config "$tmp/good.pbtxt"
expect world 2 "engine.parallel: dp*tp*pp = 4 but the world has 2 ranks" -- "$bin" check-config "$tmp/good.pbtxt" --world-size 2
expect override 2 "engine.zero.stage: 5 is out of range [0, 3]" -- "$bin" check-config "$tmp/good.pbtxt" --set engine.zero.stage=5
expect override_ok 0 "zero       stage 1" -- "$bin" check-config "$tmp/good.pbtxt" --set engine.zero.stage=1
expect bad_override 2 "--set engine.zero.stagex=1: no field 'stagex' in engine.zero" -- "$bin" check-config "$tmp/good.pbtxt" --set engine.zero.stagex=1
expect syntax 2 "$tmp/syntax.pbtxt:2:12: Expected integer, got: two" -- "$bin" check-config "$tmp/syntax.pbtxt"
expect missing 2 "/no/such.pbtxt: cannot read config file" -- "$bin" check-config /no/such.pbtxt
expect gpt2_without_header 0 "kind       gpt2 (zeroshard.TrainConfig)" -- "$bin" check-config "$tmp/good.pbtxt" --world-size 4
expect classifier 0 "model      classifier input_dim=4 projection_dim=8 (frozen) hidden=[6] num_classes=3" -- "$bin" check-config "$tmp/classifier.pbtxt" --world-size 3
expect classifier_override 2 "model.num_classes: 1 is out of range [2, 4096]" -- "$bin" check-config "$tmp/classifier.pbtxt" --set model.num_classes=1
expect unknown_kind 2 "'# proto-message: zeroshard.RegressionConfig' names no config kind zeroshard knows; known: zeroshard.TrainConfig, zeroshard.ClassifierTrainConfig" -- "$bin" check-config "$tmp/unknown_kind.pbtxt"
expect bad_flag 2 "unknown flag --wrld-size" -- "$bin" check-config "$tmp/good.pbtxt" --wrld-size 4
printf '{"traceEvents": 3}' > "$tmp/not_a_trace.json"
expect trace_missing 2 "zeroshard trace: cannot stat '/no/such/trace.json'" -- "$bin" trace /no/such/trace.json
expect trace_not_ours 2 "$tmp/not_a_trace.json: no \"traceEvents\" array" -- "$bin" trace "$tmp/not_a_trace.json"
expect trace_help 0 "usage: zeroshard trace FILE" -- "$bin" help trace
finish_cases
