#!/usr/bin/env bash
# End-to-end: train_gpt2 under real mpirun jobs. Each check is a test case.
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
bin=$1 config=$2 corpus=$3 zeroshard=$4
tmp=${TEST_TMPDIR:-$(mktemp -d)}
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/mpirun_local.sh"
common=(--set "data.train_path=$corpus" --set "data.val_path=$corpus" --set engine.logging.interval=5)

run() {  # run NP LOGNAME ARGS...  -> sets rc; output in $tmp/LOGNAME.log
  local np=$1 name=$2
  shift 2
  timeout 300 mpirun "${mpirun_flags[@]}" -np "$np" "$bin" --config "$config" "${common[@]}" "$@" >"$tmp/$name.log" 2>&1
  rc=$?
}

json_check() {  # json_check NAME PYTHON_EXPR_ON_rows_and_header
  python3 - "$2" "${@:3}" <<'PY'
import json, sys
expr, files = sys.argv[1], sys.argv[2:]
data = []
for f in files:
    lines = [json.loads(l) for l in open(f)]
    data.append((lines[0], lines[1:]))
header, rows = data[0]
ok = eval(expr)
sys.exit(0 if ok else 1)
PY
}

run 2 stage3 --steps 20 --set engine.zero.stage=3 --set "engine.logging.metrics_path=$tmp/s3.jsonl"
record_case trains_stage3_np2 $((rc == 0)) "rc=$rc: $(tail -5 "$tmp/stage3.log")"
json_check x "header['dp'] == 2 and header['zero_stage'] == 3 and header['world_size'] == 2 and len(rows) == 20 and [r['step'] for r in rows] == list(range(1, 21))" "$tmp/s3.jsonl"
st=$?
record_case metrics_header_and_steps $((st == 0)) "$(head -2 "$tmp/s3.jsonl")"
json_check x "rows[-1]['loss'] < 0.8 * rows[0]['loss'] and all(set(r['mem']) == {'params','master_params','grads','optimizer_state','activations','comm_buffers','workspace','offload_staging'} for r in rows) and all(r['comm_bytes'] > 0 and set(r['comm_bytes_by_group']) == {'dp'} and sum(r['comm_bytes_by_group'].values()) == r['comm_bytes'] and r['inter_host_bytes'] == 0 for r in rows)" "$tmp/s3.jsonl"
st=$?
record_case loss_falls_and_memory_reported $((st == 0)) "$(tail -1 "$tmp/s3.jsonl")"
grep -q "step    20/20 | loss" "$tmp/stage3.log"
st=$?
record_case progress_line_printed $((st == 0)) "$(tail -3 "$tmp/stage3.log")"
grep -Eq "^zeroshard: cpu kernels OpenBLAS [0-9.]+, [A-Za-z0-9]+ kernels, [0-9]+ threads?, [a-z0-9]+ loops$" "$tmp/stage3.log"
st=$?
json_check x "header['cpu_kernels']['library'].startswith('OpenBLAS ') and header['cpu_kernels']['core'] != '' and header['cpu_kernels']['threads'] >= 1" "$tmp/s3.jsonl"
st_json=$?
record_case startup_and_metrics_name_the_cpu_kernels $((st == 0 && st_json == 0)) \
  "$(grep 'cpu kernels' "$tmp/stage3.log"); $(head -1 "$tmp/s3.jsonl")"
# Ranks on different OpenBLAS kernels (Prescott and Core2 run on every
# x86-64 CPU): the job runs, and rank 0 warns once, naming both.
timeout 120 mpirun "${mpirun_flags[@]}" -np 1 -x OPENBLAS_CORETYPE=Prescott "$bin" --config "$config" "${common[@]}" \
  --steps 1 : -np 1 -x OPENBLAS_CORETYPE=Core2 "$bin" --config "$config" "${common[@]}" --steps 1 >"$tmp/mixed.log" 2>&1
rc=$?
warned=$(grep -c "^zeroshard: warning: world ranks 0 and 1 run different OpenBLAS kernels (Prescott and Core2)" "$tmp/mixed.log")
record_case mixed_cpu_kernels_warned_once $((rc == 0 && warned == 1)) "rc=$rc warned $warned: $(cat "$tmp/mixed.log")"

# The merged timeline: 3 ranks (odd), ZeRO-3, units big enough (C = 128) that a
# prefetched gather has a unit's compute to hide behind.
run 3 trace --steps 4 --set engine.zero.stage=3 --set engine.parallel.dp=3 --set data.batch_size=12 \
  --set model.n_embd=128 --set model.seq_len=64 \
  --set "engine.logging.trace_path=$tmp/trace/trace.json" --set engine.logging.trace_steps=3
trace_report=$(python3 - "$tmp/trace/trace.json" 2>&1 <<'PY'
import json, sys
trace = json.load(open(sys.argv[1]))
spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
ok = sorted({e["pid"] for e in trace["traceEvents"]}) == [0, 1, 2]
for rank in range(3):
    compute = [(e["ts"], e["ts"] + e["dur"]) for e in spans
               if e["pid"] == rank and e["cat"] in ("forward", "backward", "recompute")]
    gathers = [(e["ts"], e["ts"] + e["dur"]) for e in spans if e["pid"] == rank and e["cat"] == "gather"]
    hidden = [g for g in gathers if any(min(g[1], c[1]) > max(g[0], c[0]) for c in compute)]
    steps = sorted(e["name"] for e in spans if e["pid"] == rank and e["cat"] == "step")
    print(f"rank {rank}: {len(gathers)} gathers, {len(hidden)} overlap a unit's compute; {steps}")
    ok = ok and len(hidden) > 0 and steps == ["step 1", "step 2", "step 3"]
sys.exit(0 if ok else 1)
PY
)
st=$?
record_case trace_merges_every_rank_and_shows_gathers_overlapping_compute $((rc == 0 && st == 0)) \
  "rc=$rc: $trace_report $(grep -v '^step' "$tmp/trace.log" | tail -3)"
grep -q "wrote trace $tmp/trace/trace.json (.* events from 3 ranks" "$tmp/trace.log"
st=$?
record_case trace_path_printed $((st == 0)) "$(grep trace "$tmp/trace.log")"
"$zeroshard" trace "$tmp/trace/trace.json" >"$tmp/trace_summary.txt" 2>&1
st=$?
rows=$(grep -cE '^\| [0-2] \| 3 \| [0-9.]+ \| [0-9.]+ \| [0-9]+, ' "$tmp/trace_summary.txt")
record_case trace_summary_has_a_row_per_rank $((st == 0 && rows == 3)) "rc=$st rows=$rows: $(cat "$tmp/trace_summary.txt")"

# ZeRO stages give bitwise-identical training: the loss sequences match exactly.
run 2 stage0 --steps 20 --set engine.zero.stage=0 --set "engine.logging.metrics_path=$tmp/s0.jsonl"
json_check x "[r['loss'] for r in rows] == [r['loss'] for r in data[1][1]] and rows[-1]['comm_bytes'] != data[1][1][-1]['comm_bytes']" "$tmp/s0.jsonl" "$tmp/s3.jsonl"
st=$?
record_case stage0_equals_stage3_losses $((rc == 0 && st == 0)) "rc=$rc"

# The element-wise loops' vector ISA changes no bit: rank 0 at the baseline
# ISA, rank 1 at the widest this CPU has, trains exactly as both at the widest.
timeout 300 mpirun "${mpirun_flags[@]}" -np 1 -x ZEROSHARD_CPU_ISA=baseline "$bin" --config "$config" "${common[@]}" \
  --steps 20 --set engine.zero.stage=3 --set "engine.logging.metrics_path=$tmp/isa.jsonl" : -np 1 "$bin" \
  --config "$config" "${common[@]}" --steps 20 --set engine.zero.stage=3 --set "engine.logging.metrics_path=$tmp/isa.jsonl" \
  >"$tmp/isa.log" 2>&1
rc=$?
json_check x "[r['loss'] for r in rows] == [r['loss'] for r in data[1][1]] and header['cpu_kernels']['vector_isa'] == 'baseline'" "$tmp/isa.jsonl" "$tmp/s3.jsonl"
st=$?
record_case mixed_vector_isa_equals_stage3_losses $((rc == 0 && st == 0)) "rc=$rc: $(tail -3 "$tmp/isa.log")"
timeout 120 mpirun "${mpirun_flags[@]}" -np 1 -x ZEROSHARD_CPU_ISA=sse9 "$bin" --config "$config" "${common[@]}" \
  --steps 1 --set engine.parallel.dp=1 >"$tmp/badisa.log" 2>&1
rc=$?
grep -q "ZEROSHARD_CPU_ISA=sse9: expected one of baseline, avx2, avx512" "$tmp/badisa.log"
st=$?
record_case unknown_vector_isa_refused $((rc != 0 && st == 0)) "rc=$rc: $(cat "$tmp/badisa.log")"

# Outputs the units allocate without zeroing are written whole before they
# are read: filled with NaN bytes instead (ZEROSHARD_POISON_OUTPUTS=1), each
# layout trains with exactly the losses it trains with unpoisoned. The fused
# backward (ZeRO-3), the split one with selective checkpointing (ZB-H1 at
# pp 2, 2 micro-batches) and tp 2 with sequence parallelism.
poison_case() {  # poison_case NAME SET...
  local name=$1 sets=()
  shift
  for s in "$@"; do sets+=(--set "$s"); done
  sets+=(--steps 6 --set engine.logging.interval=1)
  run 2 "$name" "${sets[@]}" --set "engine.logging.metrics_path=$tmp/$name.jsonl"
  local rc_plain=$rc
  timeout 300 mpirun "${mpirun_flags[@]}" -np 2 -x ZEROSHARD_POISON_OUTPUTS=1 "$bin" --config "$config" "${common[@]}" \
    "${sets[@]}" --set "engine.logging.metrics_path=$tmp/$name.poisoned.jsonl" >"$tmp/$name.poisoned.log" 2>&1
  rc=$?
  grep -q "^zeroshard: debug: unzeroed outputs are filled with NaN bytes (ZEROSHARD_POISON_OUTPUTS=1)$" \
    "$tmp/$name.poisoned.log"
  local said=$?
  json_check x "len(rows) == 6 and [r['loss'] for r in rows] == [r['loss'] for r in data[1][1]]" \
    "$tmp/$name.poisoned.jsonl" "$tmp/$name.jsonl"
  st=$?
  record_case "$name" $((rc_plain == 0 && rc == 0 && said == 0 && st == 0)) \
    "rc=$rc_plain/$rc said=$said: $(tail -3 "$tmp/$name.log") / $(tail -3 "$tmp/$name.poisoned.log")"
}
poison_case poisoned_outputs_same_losses_stage3 engine.zero.stage=3
poison_case poisoned_outputs_same_losses_zb_h1_selective engine.parallel.dp=1 engine.parallel.pp=2 \
  engine.parallel.pipeline_schedule=ZERO_BUBBLE_H1 engine.gradient_accumulation_steps=2 \
  engine.activation_checkpointing.selective=true
poison_case poisoned_outputs_same_losses_tp2_sequence_parallel engine.parallel.dp=1 engine.parallel.tp=2 \
  engine.parallel.sequence_parallel=true

run 1 evalonly --eval_only --set engine.parallel.dp=1
grep -qE "^val_loss [0-9]+\.[0-9]{6}$" "$tmp/evalonly.log"
st=$?
record_case eval_only_prints_val_loss $((rc == 0 && st == 0)) "rc=$rc: $(cat "$tmp/evalonly.log")"

# An error every rank hits is printed once, not once per rank.
run 3 badstage --set engine.zero.stage=9 --set engine.parallel.dp=3 --set data.batch_size=12
grep -q "engine.zero.stage: 9 is out of range \[0, 3\]" "$tmp/badstage.log"
st=$?
record_case bad_config_exits_2 $((rc == 2 && st == 0)) "rc=$rc: $(cat "$tmp/badstage.log")"
printed=$(grep -o "train_gpt2:" "$tmp/badstage.log" | wc -l)
record_case agreed_error_printed_once_of_3_ranks $((printed == 1)) "printed $printed times: $(cat "$tmp/badstage.log")"

run 2 world --set engine.parallel.dp=3 --set data.batch_size=6
grep -q "engine.parallel: dp\*tp\*pp = 3 but the world has 2 ranks" "$tmp/world.log"
st=$?
record_case world_mismatch_exits_2 $((rc == 2 && st == 0)) "rc=$rc: $(cat "$tmp/world.log")"

run 2 missing --set data.train_path=/no/such/tokens.bin
grep -q "/no/such/tokens.bin" "$tmp/missing.log"
st=$?
record_case missing_tokens_named $((rc == 2 && st == 0)) "rc=$rc: $(cat "$tmp/missing.log")"

# Checkpoints: 20 steps straight == 10 steps, a new job resuming to 20, bit for bit.
ck=(--set steps=20 --set engine.logging.interval=100)
run 2 straight "${ck[@]}" --set "engine.checkpoint.dir=$tmp/ckA" --set "engine.logging.metrics_path=$tmp/A.jsonl"
rc_a=$rc
run 2 first_half "${ck[@]}" --steps 10 --set "engine.checkpoint.dir=$tmp/ckB" --set "engine.logging.metrics_path=$tmp/B.jsonl"
rc_b=$rc
run 2 resumed "${ck[@]}" --resume --set "engine.checkpoint.dir=$tmp/ckB" --set "engine.logging.metrics_path=$tmp/B.jsonl"
grep -q "resumed from .*/ckB/step_10 at step 10" "$tmp/resumed.log"
st=$?
"$zeroshard" ckpt diff "$tmp/ckA" "$tmp/ckB" --tol 0 >"$tmp/diff.log" 2>&1
st_diff=$?
json_check x "[r['loss'] for r in rows] == [r['loss'] for r in data[1][1]] and len(rows) == 20" "$tmp/A.jsonl" "$tmp/B.jsonl"
st_json=$?
record_case resume_continues_bit_for_bit $((rc_a == 0 && rc_b == 0 && rc == 0 && st == 0 && st_diff == 0 && st_json == 0)) \
  "rc $rc_a/$rc_b/$rc grep $st diff $st_diff json $st_json: $(tail -3 "$tmp/diff.log") $(tail -3 "$tmp/resumed.log")"

# A consolidated safetensors file evaluates to the run's own final validation loss.
"$zeroshard" ckpt consolidate "$tmp/ckA" --out "$tmp/A.safetensors" >"$tmp/consolidate.log" 2>&1
st_c=$?
run 1 init_eval --eval_only --set engine.parallel.dp=1 --init_from "$tmp/A.safetensors"
want=$(python3 -c "import json; print('%.6f' % [json.loads(l) for l in open('$tmp/A.jsonl')][-1]['val_loss'])")
grep -qx "val_loss $want" "$tmp/init_eval.log"
st=$?
record_case init_from_consolidated_matches_val_loss $((st_c == 0 && rc == 0 && st == 0)) \
  "consolidate $st_c rc $rc want val_loss $want: $(cat "$tmp/init_eval.log")"

# rel_close NAME A B: A and B (val_loss lines' values) within 1e-5 relative.
rel_close() {
  python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 1e-5 * abs(b) else 1)" "$2" "$3"
}
val_of() { sed -n 's/^val_loss \([0-9.]*\)$/\1/p' "$tmp/$1.log"; }

# The same file at tp 2 (dp 1, and dp 2 sequence parallel): ImportSafetensors
# splits it over the tp ranks, and the validation loss is tp 1's.
run 2 init_eval_tp2 --eval_only --set engine.parallel.dp=1 --set engine.parallel.tp=2 --init_from "$tmp/A.safetensors"
rc_a=$rc
run 4 init_eval_dp2tp2 --eval_only --set engine.parallel.dp=2 --set engine.parallel.tp=2 \
  --set engine.parallel.sequence_parallel=true --init_from "$tmp/A.safetensors"
rel_close x "$(val_of init_eval_tp2)" "$want" && rel_close x "$(val_of init_eval_dp2tp2)" "$want"
st=$?
record_case init_from_consolidated_at_tp2_matches_tp1_val_loss $((rc_a == 0 && rc == 0 && st == 0)) \
  "rc $rc_a/$rc want $want: $(cat "$tmp/init_eval_tp2.log") / $(cat "$tmp/init_eval_dp2tp2.log")"

# A vocabulary of 257 pads to 258 rows at tp 2: trained and checkpointed at
# dp 1 x tp 2, consolidated to [257, C], evaluated at tp 1 and at dp 2 x tp 2
# to the training run's own final validation loss.
v257=(--set model.vocab_size=257 --set engine.logging.interval=100)
run 2 tp2_train "${v257[@]}" --steps 4 --set engine.parallel.dp=1 --set engine.parallel.tp=2 \
  --set "engine.checkpoint.dir=$tmp/ckT" --set "engine.logging.metrics_path=$tmp/T.jsonl"
rc_t=$rc
"$zeroshard" ckpt consolidate "$tmp/ckT" --out "$tmp/T.safetensors" >"$tmp/consolidate_T.log" 2>&1
st_c=$?
wte=$(python3 - "$tmp/T.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read(1 << 20)
print(json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])["wte.weight"]["shape"])
PY
)
want_t=$(python3 -c "import json; print([json.loads(l) for l in open('$tmp/T.jsonl')][-1]['val_loss'])")
run 1 T_eval_tp1 --eval_only "${v257[@]}" --set engine.parallel.dp=1 --init_from "$tmp/T.safetensors"
rc_1=$rc
run 4 T_eval_tp2 --eval_only "${v257[@]}" --set engine.parallel.dp=2 --set engine.parallel.tp=2 --init_from "$tmp/T.safetensors"
rel_close x "$(val_of T_eval_tp1)" "$want_t" && rel_close x "$(val_of T_eval_tp2)" "$want_t"
st=$?
record_case tp2_checkpoint_consolidates_unpadded_and_evaluates_at_any_tp \
  $((rc_t == 0 && st_c == 0 && rc_1 == 0 && rc == 0 && st == 0)) \
  "train $rc_t consolidate $st_c ($(cat "$tmp/consolidate_T.log")) wte $wte eval $rc_1/$rc want $want_t: $(cat "$tmp/T_eval_tp1.log") / $(cat "$tmp/T_eval_tp2.log")"
[ "$wte" = "[257, 32]" ]
record_case tp2_consolidated_wte_is_unpadded $((! $?)) "wte.weight $wte"

# Resuming that checkpoint at tp 1 reshards it: the run continues.
run 2 tp_resume_at_tp1 --resume "${v257[@]}" --set engine.parallel.dp=2 --set "engine.checkpoint.dir=$tmp/ckT"
grep -q "at step 4 (resharded from dp 1 tp 2 pp 1)" "$tmp/tp_resume_at_tp1.log"
st=$?
record_case resume_at_another_tp_reshards $((rc == 0 && st == 0)) "rc=$rc: $(cat "$tmp/tp_resume_at_tp1.log")"

# Resuming at another dp reshards on load and trains on.
run 4 reshard_resume --resume --set steps=24 --set engine.parallel.dp=4 --set "engine.checkpoint.dir=$tmp/ckA"
grep -q "resumed from .*/ckA/step_20 at step 20 (resharded from dp 2 tp 1 pp 1)" "$tmp/reshard_resume.log" && grep -q "step    24/24" "$tmp/reshard_resume.log"
st=$?
record_case resume_at_dp4_reshards $((rc == 0 && st == 0)) "rc=$rc: $(tail -4 "$tmp/reshard_resume.log")"

run 2 resume_nothing --resume --set "engine.checkpoint.dir=$tmp/empty_root"
grep -q "empty_root" "$tmp/resume_nothing.log"
st=$?
record_case resume_without_checkpoint_fails_naming_dir $((rc != 0 && st == 0)) "rc=$rc: $(head -3 "$tmp/resume_nothing.log")"

# Resuming with another optimizer is refused, naming both; weights only is fine.
run 2 resume_as_sgd --resume --set engine.optimizer.type=SGD --set "engine.checkpoint.dir=$tmp/ckB"
grep -q "checkpoint '.*/ckB/step_20' holds adamw optimizer state (exp_avg, exp_avg_sq); this run's optimizer is sgd without momentum (no state): resume with the same optimizer, or load weights only with --init_from" "$tmp/resume_as_sgd.log"
st=$?
printed=$(grep -c "train_gpt2:" "$tmp/resume_as_sgd.log")
record_case resume_with_another_optimizer_refused $((rc == 1 && st == 0 && printed == 1)) "rc=$rc printed $printed: $(cat "$tmp/resume_as_sgd.log")"
run 2 init_as_sgd --steps 2 --set engine.optimizer.type=SGD --init_from "$tmp/ckB"
record_case init_from_with_another_optimizer_trains $((rc == 0)) "rc=$rc: $(tail -3 "$tmp/init_as_sgd.log")"

# Lion (a plug-in optimizer) learns: tiny's 50 steps at lr 1e-3, the mean
# loss of the last 5 steps below 0.9x the first 5; its checkpoint records
# the optimizer and its one state kind, which ckpt inspect lists.
run 2 lion --set engine.optimizer.type=LION --set engine.optimizer.lr=1e-3 \
  --set "engine.logging.metrics_path=$tmp/lion.jsonl" --set "engine.checkpoint.dir=$tmp/ckL"
lion_losses=$(python3 -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])][1:]
first, last = sum(r['loss'] for r in rows[:5]) / 5, sum(r['loss'] for r in rows[-5:]) / 5
print(len(rows), '%.4f' % first, '%.4f' % last, int(len(rows) == 50 and last < 0.9 * first))" "$tmp/lion.jsonl" 2>&1)
record_case lion_trains_tiny_np2 $((rc == 0)) "rc=$rc: $(tail -3 "$tmp/lion.log")"
echo "lion: steps, first-5 mean loss, last-5 mean loss, passed: $lion_losses"
[ "${lion_losses##* }" = 1 ]
record_case lion_last5_below_0.9x_first5 $((! $?)) "steps, first-5 mean, last-5 mean: $lion_losses"
"$zeroshard" ckpt inspect "$tmp/ckL/step_50" >"$tmp/lion_inspect.log" 2>&1
grep -q "^optimizer:   lion; kinds master, exp_avg$" "$tmp/lion_inspect.log"
record_case lion_checkpoint_inspect_lists_its_state $((! $?)) "$(cat "$tmp/lion_inspect.log")"

# A save that fails (here `latest` cannot be written) exits 1 with the error
# printed once, leaving no temporary directory and `latest` at the old step.
fail_ck=(--set steps=4 --set engine.checkpoint.interval=2 --set engine.logging.interval=100 --set "engine.checkpoint.dir=$tmp/ckF")
run 2 fail_first "${fail_ck[@]}" --steps 2
rc_a=$rc
mkdir -p "$tmp/ckF/latest.tmp/blocker"
run 2 fail_save "${fail_ck[@]}" --resume
grep -q "committing the checkpoint failed on dp rank 0: cannot create '.*/ckF/latest.tmp': Is a directory; step 4 was not saved" "$tmp/fail_save.log"
st=$?
printed=$(grep -c "train_gpt2:" "$tmp/fail_save.log")
left=$(cd "$tmp/ckF" && ls -A | tr '\n' ' ')
record_case failed_save_exits_1_printed_once $((rc_a == 0 && rc == 1 && st == 0 && printed == 1)) \
  "rc $rc_a/$rc printed $printed: $(cat "$tmp/fail_save.log")"
[ "$left" = "latest latest.tmp step_2 " ] && [ "$(cat "$tmp/ckF/latest")" = step_2 ]
record_case failed_save_leaves_latest_and_no_temporary $((! $?)) "left: $left; latest: $(cat "$tmp/ckF/latest")"
rm -r "$tmp/ckF/latest.tmp"
run 2 fail_retry "${fail_ck[@]}" --resume
grep -q "resumed from .*/ckF/step_2 at step 2" "$tmp/fail_retry.log"
st=$?
record_case failed_save_retried_from_step_2 $((rc == 0 && st == 0)) "rc=$rc: $(tail -3 "$tmp/fail_retry.log")"

# f16 compute: the header says so and the dynamic scaler's scale reaches the metrics.
run 2 f16 --steps 4 --set engine.precision.compute_dtype=F16 --set "engine.logging.metrics_path=$tmp/f16.jsonl"
json_check x "header['compute_dtype'] == 'f16' and [r['loss_scale'] for r in rows] == [65536.0] * 4" "$tmp/f16.jsonl"
st=$?
record_case f16_loss_scale_reported $((rc == 0 && st == 0)) "rc=$rc: $(tail -2 "$tmp/f16.jsonl")"

# The straggler report: rank 1 of 3 made 200 ms slower per step (far above
# this machine's noise) is named in every logging step's metrics and in the
# progress line; the logging steps are 1, 3, 6 (interval 3 and the last).
run 3 straggler --steps 6 --set engine.parallel.dp=3 --set data.batch_size=6 --set engine.logging.interval=3 \
  --set "engine.logging.metrics_path=$tmp/straggler.jsonl" --testing_slow_rank 1:200
json_check x "[r['step'] for r in rows if 'straggler' in r] == [1, 3, 6] and all(r['straggler']['slowest_rank'] == 1 and r['straggler']['slowest_ms'] >= 190 * (3 if r['step'] == 6 else 2 if r['step'] == 3 else 1) and r['straggler']['slowest_ms'] > 1.2 * r['straggler']['median_ms'] for r in rows if 'straggler' in r)" "$tmp/straggler.jsonl"
st=$?
record_case straggler_in_metrics $((rc == 0 && st == 0)) "rc=$rc: $(grep straggler "$tmp/straggler.jsonl" | tail -2)"
[ "$(grep -c "| slowest rank 1: " "$tmp/straggler.log")" = 3 ]
record_case straggler_in_progress_line $((! $?)) "$(grep "step " "$tmp/straggler.log")"

finish_cases
