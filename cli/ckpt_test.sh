#!/usr/bin/env bash
# End-to-end checks of `zeroshard ckpt`: every command's output and exit code
# on a small checkpoint, corruption caught by verify, consolidate of a
# checkpoint equal to consolidate of its reshard, import round trips.
# Usage: ckpt_test.sh ZEROSHARD FIXTURE_MAIN
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
bin=$1 fixture_main=$2
tmp=${TEST_TMPDIR:-$(mktemp -d)}/ckpt_cli
rm -rf "$tmp" && mkdir -p "$tmp"
"$fixture_main" "$tmp" || { echo "fixture generation failed"; exit 1; }
ck=$tmp/fixture

expect help 0 "consolidate DIR --out FILE.safetensors" -- "$bin" help ckpt
expect no_command 2 "usage: zeroshard ckpt COMMAND" -- "$bin" ckpt
expect unknown_command 2 "no ckpt command 'frob'" -- "$bin" ckpt frob
expect inspect 0 "topology:    dp=4 tp=1 pp=1, saved by ZeRO stage 2" -- "$bin" ckpt inspect "$ck"
expect inspect_step_dir 0 "step:        9 (optimizer steps 9)" -- "$bin" ckpt inspect "$ck/step_9"
expect inspect_missing 2 "checkpoint '$tmp/nope' does not exist" -- "$bin" ckpt inspect "$tmp/nope"
expect verify_missing_dir 2 "checkpoint '$tmp/nope' does not exist" -- "$bin" ckpt verify "$tmp/nope"
expect verify_ok 0 "manifest and 4 shard file(s) intact" -- "$bin" ckpt verify "$ck"
expect reshard 0 "(dp 4 -> 2)" -- "$bin" ckpt reshard "$ck" --out "$tmp/dp2" --dp 2
expect reshard_bad_dp 2 "--dp '0' must be >= 1" -- "$bin" ckpt reshard "$ck" --out "$tmp/dp0" --dp 0
expect verify_resharded 0 "manifest and 2 shard file(s) intact" -- "$bin" ckpt verify "$tmp/dp2"
expect diff_same 0 "0 of 18 tensors differ by more than 0" -- "$bin" ckpt diff "$ck" "$tmp/dp2"
expect consolidate_dp4 0 "wrote $tmp/c4.safetensors (step 9, bf16)" -- "$bin" ckpt consolidate "$ck" --out "$tmp/c4.safetensors" --dtype bf16 --optimizer
expect consolidate_dp2 0 "wrote" -- "$bin" ckpt consolidate "$tmp/dp2" --out "$tmp/c2.safetensors" --dtype bf16 --optimizer
if cmp -s "$tmp/c4.safetensors" "$tmp/c2.safetensors"; then record_case consolidate_equal_across_dp 1; else record_case consolidate_equal_across_dp 0 "c4 and c2 differ"; fi
expect consolidate_bad_dtype 2 "--dtype 'f64' is not one of f32, bf16, f16" -- "$bin" ckpt consolidate "$ck" --out "$tmp/x.safetensors" --dtype f64

expect import 0 "(dp 3, step 0)" -- "$bin" ckpt import "$tmp/gpt2.safetensors" --config "$tmp/gpt2.pbtxt" --out "$tmp/imported"
expect import_verify 0 "manifest and 3 shard file(s) intact" -- "$bin" ckpt verify "$tmp/imported"
expect import_consolidate 0 "wrote" -- "$bin" ckpt consolidate "$tmp/imported" --out "$tmp/i1.safetensors"
expect reimport 0 "(dp 2, step 0)" -- "$bin" ckpt import "$tmp/i1.safetensors" --config "$tmp/gpt2.pbtxt" --set engine.parallel.dp=2 --out "$tmp/reimported"
expect reimport_consolidate 0 "wrote" -- "$bin" ckpt consolidate "$tmp/reimported" --out "$tmp/i2.safetensors"
if cmp -s "$tmp/i1.safetensors" "$tmp/i2.safetensors"; then record_case import_round_trip_exact 1; else record_case import_round_trip_exact 0 "i1 and i2 differ"; fi
expect import_wrong_model 2 "tensor 'wte.weight' has shape [11, 4], the config's model expects [13, 8]" -- "$bin" ckpt import "$tmp/c4.safetensors" --config "$tmp/gpt2.pbtxt" --out "$tmp/bad"
expect diff_models 1 "the checkpoints have 4 and 3 units" -- "$bin" ckpt diff "$ck" "$tmp/imported"

# Corruption: a flipped data byte is named by file and tensor; diff sees it.
f=$tmp/dp2/step_9/rank_00001.safetensors
size=$(stat -c %s "$f")
printf '\x7f' | dd of="$f" bs=1 seek=$((size - 1)) conv=notrunc status=none
expect verify_corrupt 1 "rank_00001.safetensors': tensor 'unit.3.exp_avg_sq'" -- "$bin" ckpt verify "$tmp/dp2"
expect consolidate_corrupt 1 "tensor 'unit.3.exp_avg_sq' has crc32c" -- "$bin" ckpt consolidate "$tmp/dp2" --out "$tmp/y.safetensors" --optimizer
rm "$tmp/dp2/step_9/rank_00000.safetensors"
expect verify_missing 1 "shard file of dp rank 0 is missing" -- "$bin" ckpt verify "$tmp/dp2"
truncate -s 100 "$ck/step_9/rank_00002.safetensors"
expect verify_truncated 1 "rank_00002.safetensors' has 100 bytes" -- "$bin" ckpt verify "$ck"
sed -i 's/format_version: 1/format_version: 7/' "$ck/step_9/manifest.pbtxt"
expect verify_manifest 1 "checksum mismatch" -- "$bin" ckpt verify "$ck"
echo "step_9x" > "$ck/latest"
expect bad_latest 1 "expected 'step_<N>'" -- "$bin" ckpt inspect "$ck"
expect diff_tol 0 "" -- "$bin" ckpt diff "$tmp/imported" "$tmp/reimported" --tol 0
finish_cases
