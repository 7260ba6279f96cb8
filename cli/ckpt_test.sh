#!/usr/bin/env bash
# End-to-end checks of `zeroshard ckpt`: every command's output and exit code
# on a small checkpoint, corruption caught by verify, consolidate of a
# checkpoint equal to consolidate of its reshard, import round trips; a
# tensor-parallel checkpoint (tp 2, padded vocabulary) written by a 2-rank
# mpirun job of the fixture: inspect shows its layout, verify, consolidate
# (whole unpadded tensors equal to the run's GatherParam, and named and
# shaped as at tp 1), diff, and reshard refusing it.
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
expect reshard 0 "(dp 4 tp 1 pp 1 -> dp 2 tp 1 pp 1)" -- "$bin" ckpt reshard "$ck" --out "$tmp/dp2" --dp 2
expect reshard_bad_dp 2 "--dp '0' must be >= 1" -- "$bin" ckpt reshard "$ck" --out "$tmp/dp0" --dp 0
expect verify_resharded 0 "manifest and 2 shard file(s) intact" -- "$bin" ckpt verify "$tmp/dp2"
expect diff_same 0 "0 of 18 tensors differ by more than 0" -- "$bin" ckpt diff "$ck" "$tmp/dp2"
expect consolidate_dp4 0 "wrote $tmp/c4.safetensors (step 9, bf16)" -- "$bin" ckpt consolidate "$ck" --out "$tmp/c4.safetensors" --dtype bf16 --optimizer
expect consolidate_dp2 0 "wrote" -- "$bin" ckpt consolidate "$tmp/dp2" --out "$tmp/c2.safetensors" --dtype bf16 --optimizer
if cmp -s "$tmp/c4.safetensors" "$tmp/c2.safetensors"; then record_case consolidate_equal_across_dp 1; else record_case consolidate_equal_across_dp 0 "c4 and c2 differ"; fi
expect consolidate_bad_dtype 2 "--dtype 'f64' is not one of f32, bf16, f16" -- "$bin" ckpt consolidate "$ck" --out "$tmp/x.safetensors" --dtype f64

expect import 0 "(dp 3 tp 1 pp 1, step 0)" -- "$bin" ckpt import "$tmp/gpt2.safetensors" --config "$tmp/gpt2.pbtxt" --out "$tmp/imported"
expect import_verify 0 "manifest and 3 shard file(s) intact" -- "$bin" ckpt verify "$tmp/imported"
expect import_consolidate 0 "wrote" -- "$bin" ckpt consolidate "$tmp/imported" --out "$tmp/i1.safetensors"
expect reimport 0 "(dp 2 tp 1 pp 1, step 0)" -- "$bin" ckpt import "$tmp/i1.safetensors" --config "$tmp/gpt2.pbtxt" --set engine.parallel.dp=2 --out "$tmp/reimported"
expect reimport_consolidate 0 "wrote" -- "$bin" ckpt consolidate "$tmp/reimported" --out "$tmp/i2.safetensors"
if cmp -s "$tmp/i1.safetensors" "$tmp/i2.safetensors"; then record_case import_round_trip_exact 1; else record_case import_round_trip_exact 0 "i1 and i2 differ"; fi
expect import_wrong_model 2 "tensor 'wte.weight' has shape [11, 4], the config's model expects [13, 8]" -- "$bin" ckpt import "$tmp/c4.safetensors" --config "$tmp/gpt2.pbtxt" --out "$tmp/bad"
expect diff_models 1 "the checkpoints have 4 and 3 units" -- "$bin" ckpt diff "$ck" "$tmp/imported"

# Corruption: a flipped data byte is named by file and tensor; diff sees it.
f=$tmp/dp2/step_9/shard_pp000_dp00001_tp000.safetensors
size=$(stat -c %s "$f")
printf '\x7f' | dd of="$f" bs=1 seek=$((size - 1)) conv=notrunc status=none
expect verify_corrupt 1 "shard_pp000_dp00001_tp000.safetensors': tensor 'unit.3.exp_avg_sq'" -- "$bin" ckpt verify "$tmp/dp2"
expect consolidate_corrupt 1 "tensor 'unit.3.exp_avg_sq' has crc32c" -- "$bin" ckpt consolidate "$tmp/dp2" --out "$tmp/y.safetensors" --optimizer
rm "$tmp/dp2/step_9/shard_pp000_dp00000_tp000.safetensors"
expect verify_missing 1 "shard file of dp rank 0 is missing" -- "$bin" ckpt verify "$tmp/dp2"
truncate -s 100 "$ck/step_9/shard_pp000_dp00002_tp000.safetensors"
expect verify_truncated 1 "shard_pp000_dp00002_tp000.safetensors' has 100 bytes" -- "$bin" ckpt verify "$ck"
sed -i 's/format_version: [0-9]*/format_version: 7/' "$ck/step_9/manifest.pbtxt"
expect verify_manifest 1 "checksum mismatch" -- "$bin" ckpt verify "$ck"
echo "step_9x" > "$ck/latest"
expect bad_latest 1 "expected 'step_<N>'" -- "$bin" ckpt inspect "$ck"
expect diff_tol 0 "" -- "$bin" ckpt diff "$tmp/imported" "$tmp/reimported" --tol 0

# Tensor parallelism: tp2/ (dp 1 x tp 2, vocabulary 13 padded to 14 rows)
# and tp1/ (the same model and data at dp 2 x tp 1), both at step 2.
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/mpirun_local.sh"
tpdir=$tmp/tp
mkdir -p "$tpdir"
timeout 120 mpirun "${mpirun_flags[@]}" -np 2 "$fixture_main" --tp2 "$tpdir" >"$tmp/tp_fixture.log" 2>&1
rc=$?
record_case tp_fixture $((rc == 0)) "rc=$rc: $(cat "$tmp/tp_fixture.log")"
tp2=$tpdir/tp2 tp1=$tpdir/tp1
expect tp_inspect_model 0 "model:       gpt2 (zeroshard.TrainConfig)" -- "$bin" ckpt inspect "$tp2"
expect tp_inspect_tensor_naming 0 "tensors:     Hugging Face GPT-2 names" -- "$bin" ckpt inspect "$tp2"
expect tp_inspect_topology 0 "topology:    dp=1 tp=2 pp=1, saved by ZeRO stage 3" -- "$bin" ckpt inspect "$tp2"
expect tp_inspect_parameters 0 "parameters:  1024 in 3 units; each tp rank holds 564 (576 stored with padding)" -- "$bin" ckpt inspect "$tp2"
expect tp_inspect_file0 0 "shard_pp000_dp00000_tp000.safetensors pp 0 dp 0 tp 0," -- "$bin" ckpt inspect "$tp2"
expect tp_inspect_file1 0 "shard_pp000_dp00000_tp001.safetensors pp 0 dp 0 tp 1," -- "$bin" ckpt inspect "$tp2"
expect tp_inspect_split_count 0 "tensor parallel: tp=2; 7 split parameters (whole -> per tp rank), 9 replicated" -- "$bin" ckpt inspect "$tp2"
expect tp_inspect_vocab 0 "wte.weight                   [14, 8] -> [7, 8] split(dim=0, blocks=1), logical [13, 8] (the rest is padding)" -- "$bin" ckpt inspect "$tp2"
expect tp_inspect_qkv 0 "h.0.attn.c_attn.weight       [8, 24] -> [8, 12] split(dim=1, blocks=3)" -- "$bin" ckpt inspect "$tp2"
expect tp_inspect_tp1_files 0 "shard_pp000_dp00001_tp000.safetensors pp 0 dp 1 tp 0," -- "$bin" ckpt inspect "$tp1"
out=$("$bin" ckpt inspect "$tp1" 2>&1)
[[ "$out" != *"tensor parallel:"* && "$out" == *"parameters:  1024 (1088 stored with padding) in 3 units"* ]]
record_case tp1_inspect_has_no_tp_section $((! $?)) "$out"
expect tp_verify 0 "manifest and 2 shard file(s) intact" -- "$bin" ckpt verify "$tp2"
expect tp_consolidate 0 "wrote $tpdir/c2.safetensors (step 2, f32)" -- "$bin" ckpt consolidate "$tp2" --out "$tpdir/c2.safetensors"
expect tp1_consolidate 0 "wrote" -- "$bin" ckpt consolidate "$tp1" --out "$tpdir/c1.safetensors"
expect tp_consolidate_bf16_optimizer 0 "wrote" -- "$bin" ckpt consolidate "$tp2" --out "$tpdir/c2o.safetensors" --dtype bf16 --optimizer

# safetensors_tensors FILE: one line per tensor in data order, "name dtype
# [shape] crc" (crc32 of its bytes), metadata left out.
safetensors_tensors() {
  python3 - "$1" <<'PY'
import json, struct, sys, zlib
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h.pop("__metadata__", None)
for name, t in sorted(h.items(), key=lambda kv: kv[1]["data_offsets"][0]):
    lo, hi = t["data_offsets"]
    print(name, t["dtype"], t["shape"], "%08x" % zlib.crc32(b[8 + n + lo:8 + n + hi]))
PY
}
c2=$(safetensors_tensors "$tpdir/c2.safetensors")
c1=$(safetensors_tensors "$tpdir/c1.safetensors")
gathered=$(safetensors_tensors "$tpdir/tp2_gathered.safetensors")
[ -n "$c2" ] && [ "$(sort <<<"$c2")" = "$(sort <<<"$gathered")" ]
record_case tp_consolidate_equals_gather_param $((! $?)) "consolidated:
$c2
GatherParam:
$gathered"
[[ "$c2" == *"wte.weight F32 [13, 8] "* && "$c2" == *"h.0.attn.c_attn.weight F32 [8, 24] "* && "$c2" != *"lm_head"* ]]
record_case tp_consolidate_whole_unpadded_shapes $((! $?)) "$c2"
[ "$(cut -d' ' -f1-3 <<<"$c2")" = "$(cut -d' ' -f1-3 <<<"$c1")" ] && [ "$(wc -l <<<"$c2")" = 16 ]
record_case tp_consolidate_names_and_shapes_as_at_tp1 $((! $?)) "tp 2:
$c2
tp 1:
$c1"
c2o=$(safetensors_tensors "$tpdir/c2o.safetensors")
[[ "$c2o" == *"wte.weight BF16 [13, 8] "* && "$c2o" == *"optimizer.exp_avg_sq.wte.weight F32 [13, 8] "* ]] && [ "$(wc -l <<<"$c2o")" = 48 ]
record_case tp_consolidate_bf16_with_optimizer $((! $?)) "$c2o"

cp -r "$tp2" "$tpdir/tp2_copy"
expect tp_diff_same 0 "0 of 48 tensors differ by more than 0" -- "$bin" ckpt diff "$tp2" "$tpdir/tp2_copy"
# Across tp sizes the whole tensors are compared (tp sums in another order).
expect tp_diff_across_tp 0 "0 of 48 tensors differ by more than 0.0001" -- "$bin" ckpt diff "$tp1" "$tp2" --tol 1e-4
expect tp_diff_across_tp_not_bitwise 1 "wte.weight" -- "$bin" ckpt diff "$tp1" "$tp2"
# Offline resharding across tp (and dp, pp) keeps every whole tensor and the
# optimizer state: the consolidated files are byte-identical.
expect tp_reshard 0 "(dp 1 tp 2 pp 1 -> dp 2 tp 1 pp 1)" -- "$bin" ckpt reshard "$tp2" --out "$tpdir/resharded" --dp 2 --tp 1
expect tp_reshard_verify 0 "manifest and 2 shard file(s) intact" -- "$bin" ckpt verify "$tpdir/resharded"
"$bin" ckpt consolidate "$tp2" --out "$tpdir/tp2_full.safetensors" --optimizer >/dev/null 2>&1
"$bin" ckpt consolidate "$tpdir/resharded" --out "$tpdir/resharded_full.safetensors" --optimizer >/dev/null 2>&1
cmp "$tpdir/tp2_full.safetensors" "$tpdir/resharded_full.safetensors"
record_case tp_reshard_consolidates_to_the_same_bytes $((! $?)) "$(ls -la "$tpdir"/*_full.safetensors 2>&1)"
expect tp_reshard_bad_split 2 "parameter 'h.0.attn.c_attn.weight' [8, 24] is split on dimension 1 in 3 block(s) over tp 3: 24 is not a multiple of 9" -- "$bin" ckpt reshard "$tp2" --out "$tpdir/bad" --tp 3
rm "$tpdir/tp2_copy/step_2/shard_pp000_dp00000_tp001.safetensors"
expect tp_verify_missing 1 "shard file of dp rank 0 tp rank 1 is missing" -- "$bin" ckpt verify "$tpdir/tp2_copy"
finish_cases
