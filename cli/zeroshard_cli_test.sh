#!/usr/bin/env bash
# End-to-end checks of the zeroshard binary: exit codes and messages.
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
bin=$1
demo=$2  # examples/configs/demo_zero3.pbtxt
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
# Prescott is OpenBLAS's generic x86-64 kernel set: every x86-64 CPU runs it.
expect cpu_kernels 0 "Prescott kernels, 3 threads per rank" -- env OPENBLAS_CORETYPE=Prescott "$bin" check-config \
  "$tmp/good.pbtxt" --set engine.device.threads_per_rank=3
expect vector_isa 0 "3 threads per rank, baseline loops" -- env ZEROSHARD_CPU_ISA=baseline "$bin" check-config \
  "$tmp/good.pbtxt" --set engine.device.threads_per_rank=3
expect bad_vector_isa 2 "ZEROSHARD_CPU_ISA=sse9: expected one of baseline, avx2, avx512 (or unset for the widest)" -- \
  env ZEROSHARD_CPU_ISA=sse9 "$bin" check-config "$tmp/good.pbtxt"
expect world 2 "engine.parallel: dp*tp*pp = 4 but the world has 2 ranks" -- "$bin" check-config "$tmp/good.pbtxt" --world-size 2
expect override 2 "engine.zero.stage: 5 is out of range [0, 3]" -- "$bin" check-config "$tmp/good.pbtxt" --set engine.zero.stage=5
expect override_ok 0 "zero       stage 1" -- "$bin" check-config "$tmp/good.pbtxt" --set engine.zero.stage=1
expect bad_override 2 "--set engine.zero.stagex=1: no field 'stagex' in engine.zero" -- "$bin" check-config "$tmp/good.pbtxt" --set engine.zero.stagex=1
expect syntax 2 "$tmp/syntax.pbtxt:2:12: Expected integer, got: two" -- "$bin" check-config "$tmp/syntax.pbtxt"
expect missing 2 "/no/such.pbtxt: cannot read config file" -- "$bin" check-config /no/such.pbtxt
expect gpt2_without_header 0 "kind       gpt2 (zeroshard.TrainConfig)" -- "$bin" check-config "$tmp/good.pbtxt" --world-size 4
expect classifier 0 "model      classifier input_dim=4 projection_dim=8 (frozen) hidden=[6] num_classes=3" -- "$bin" check-config "$tmp/classifier.pbtxt" --world-size 3
expect classifier_override 2 "model.num_classes: 1 is out of range [2, 4096]" -- "$bin" check-config "$tmp/classifier.pbtxt" --set model.num_classes=1
expect unknown_kind 2 "'# proto-message: zeroshard.RegressionConfig' names no registered model; registered: classifier (zeroshard.ClassifierTrainConfig), gpt2 (zeroshard.TrainConfig)" -- "$bin" check-config "$tmp/unknown_kind.pbtxt"
expect bad_flag 2 "unknown flag --wrld-size" -- "$bin" check-config "$tmp/good.pbtxt" --wrld-size 4
printf '{"traceEvents": 3}' > "$tmp/not_a_trace.json"
expect trace_missing 2 "zeroshard trace: cannot stat '/no/such/trace.json'" -- "$bin" trace /no/such/trace.json
expect trace_not_ours 2 "$tmp/not_a_trace.json: no \"traceEvents\" array" -- "$bin" trace "$tmp/not_a_trace.json"
expect trace_help 0 "usage: zeroshard trace FILE" -- "$bin" help trace

# zeroshard schedule on the README's demo at dp 4: GPT-2 n_layer=4 C=128
# V=256 T=64 is 6 units (embed, h.0..h.3, head; head borrows wte), one
# micro-batch, ZeRO-3 with prefetch 1 and reshard_after_forward. Shards of
# P/4 elements in f32 are P bytes: embed (256+64)*128 = 40960, each block
# 12*128^2 + 13*128 = 198272, head 2*128 = 256; all P = 834304. Each unit is
# gathered for its forward and again for its backward, but head and embed
# (head's needs) stay gathered across the turnaround; each gradient is
# reduce-scattered once, and an AllGather or ReduceScatter sends 3/4 of the
# whole buffer, (4-1) x the shard bytes: 3 x (2 x 834304 - 40960 - 256) =
# 4882176 and 3 x 834304 = 2502912. The norm's AllReduce is 5 f32: 2 x 3/4 x 20 = 30.
expect_eq() {  # expect_eq NAME GOT WANT
  if [ "$2" = "$3" ]; then record_case "$1" 1; else record_case "$1" 0 "got '$2', want '$3'"; fi
}
lines() { grep -c "^$1\( \|$\)" <<<"$2"; }
out=$("$bin" schedule "$demo" --world-size 4 2>&1)
expect_eq schedule_rc $? 0
expect_eq schedule_header "$(head -1 <<<"$out")" "$demo (gpt2): GPT-2 n_layer=4 n_head=4 n_embd=128 \
vocab_size=256 seq_len=64: 834304 parameters; dp=4, ZeRO stage 3, 1 micro-batch; train program of rank 0: \
6 units, 4 buckets, 65 actions"
expect_eq schedule_forward_lines "$(lines FORWARD "$out")" 6  # units x micro-batches
expect_eq schedule_backward_lines "$(lines BACKWARD "$out")" 6
expect_eq schedule_gather_lines "$(lines GATHER "$out")" 10  # the AllGathers below: the optimizer issues none
expect_eq schedule_wait_gather_lines "$(lines WAIT_GATHER "$out")" 10
expect_eq schedule_release_lines "$(lines RELEASE "$out")" 10
expect_eq schedule_reduce_lines "$(lines REDUCE "$out")" 4  # 1 MiB buckets: h.3..head, h.2, h.1, embed..h.0
expect_eq schedule_wait_reduce_lines "$(lines WAIT_REDUCE "$out")" 4
# The optimizer phase under its heading: per bucket a NORM_PARTIAL, an
# UPDATE and a PUBLISH around one REDUCE_NORM.
expect_eq schedule_optimizer_lines "$(lines OPTIMIZER: "$out")" 1
expect_eq schedule_norm_partial_lines "$(lines NORM_PARTIAL "$out")" 4
expect_eq schedule_reduce_norm_lines "$(lines REDUCE_NORM "$out")" 1
expect_eq schedule_update_lines "$(lines UPDATE "$out")" 4
expect_eq schedule_publish_lines "$(lines PUBLISH "$out")" 4
expect_eq schedule_scaler_lines "$(lines SCALER_UPDATE "$out")" 1
expect_eq schedule_begin_step "$(sed -n 2p <<<"$out")" "BEGIN_STEP"
expect_eq schedule_first_action "$(sed -n 3p <<<"$out")" "GATHER unit=embed bytes=40960"
expect_eq schedule_block_gather "$(grep -c '^GATHER unit=h.2 bytes=198272$' <<<"$out")" 2
expect_eq schedule_forward_action "$(grep -c '^FORWARD mb=0 unit=head$' <<<"$out")" 1
expect_eq schedule_tied_bucket "$(grep -c '^REDUCE bucket=embed..h.0 bytes=239232$' <<<"$out")" 1
expect_eq schedule_gather_bytes "$(awk -F'bytes=' '/^GATHER /{s += $2} END {print 3 * s}' <<<"$out")" 4882176
expect_eq schedule_allgather "$(grep -cE '^  dp AllGather +10 calls +4882176 bytes$' <<<"$out")" 1
expect_eq schedule_reducescatter "$(grep -cE '^  dp ReduceScatter +4 calls +2502912 bytes$' <<<"$out")" 1
expect_eq schedule_allreduce "$(grep -cE '^  dp AllReduce +1 call +30 bytes$' <<<"$out")" 1
expect_eq schedule_control "$(grep -cE '^  control AllGather +1 call +\(BEGIN_STEP.s batch-signature agreement' <<<"$out")" 1
expect_eq schedule_total "$(grep -cE '^  total +65$' <<<"$out")" 1
# Embed stays gathered through the forward (head borrows it), plus the
# computing unit and the prefetched one; all 6 units' activations are kept
# until the backward starts.
expect_eq schedule_peak_gathered "$(grep -cE '^  peak gathered units +3$' <<<"$out")" 1
expect_eq schedule_peak_kept "$(grep -cE '^  peak kept activations +6$' <<<"$out")" 1
expect_eq schedule_verdict "$(tail -1 <<<"$out")" "  verdict: OK"
# Two micro-batches, DEFER: every forward and backward twice, one reduction.
out=$("$bin" schedule "$demo" --world-size 4 --set engine.gradient_accumulation_steps=2 \
  --set engine.zero.reduce_mode=DEFER 2>&1)
expect_eq schedule_defer_rc $? 0
expect_eq schedule_defer_forward_lines "$(lines FORWARD "$out")" 12
expect_eq schedule_defer_reduce_lines "$(lines REDUCE "$out")" 4
expect_eq schedule_defer_peak_kept "$(grep -cE '^  peak kept activations +6$' <<<"$out")" 1
# Stage 1: nothing gathered in the step; PUBLISH all-gathers each unit's
# parameters (6 AllGathers, 3 x 834304 bytes) after the norm.
out=$("$bin" schedule "$demo" --world-size 4 --set engine.zero.stage=1 2>&1)
expect_eq schedule_stage1_rc $? 0
expect_eq schedule_stage1_gather_lines "$(lines GATHER "$out")" 0
expect_eq schedule_stage1_allgather "$(grep -cE '^  dp AllGather +6 calls +2502912 bytes$' <<<"$out")" 1
expect_eq schedule_stage1_verdict "$(tail -1 <<<"$out")" "  verdict: OK"
expect schedule_rank 0 "train program of rank 3:" -- "$bin" schedule "$demo" --world-size 4 --rank 3
expect schedule_bad_rank 2 "zeroshard schedule: --rank: 4 is outside [0, 4)" -- \
  "$bin" schedule "$demo" --world-size 4 --rank 4
expect schedule_missing 2 "/no/such.pbtxt: cannot read config file" -- "$bin" schedule /no/such.pbtxt
expect schedule_syntax 2 "$tmp/syntax.pbtxt:2:12: Expected integer, got: two" -- "$bin" schedule "$tmp/syntax.pbtxt"
expect schedule_invalid 2 "engine.zero.stage: 5 is out of range [0, 3]" -- \
  "$bin" schedule "$demo" --set engine.zero.stage=5
expect schedule_world 2 "engine.parallel: dp*tp*pp = 4 but the world has 3 ranks" -- \
  "$bin" schedule "$demo" --world-size 3
expect schedule_bad_flag 2 "unknown flag --rnk" -- "$bin" schedule "$demo" --rnk 1
expect schedule_help 0 "usage: zeroshard schedule CONFIG" -- "$bin" help schedule
# Pipelines (planned and simulated; the engine does not run them yet). The
# demo's 6 units over 4 stages of 1F1B, 8 micro-batches, partitioned by the
# parameters each unit reads: embed..h.0, h.1, h.2, h.3..head; with one
# time step per unit the two-unit end stages idle least.
pp4=(--set engine.parallel.dp=1 --set engine.parallel.pp=4 --set engine.gradient_accumulation_steps=8)
out=$("$bin" schedule "$demo" "${pp4[@]}" --simulate 2>&1)
expect_eq pipeline_1f1b_rc $? 0
expect_eq pipeline_1f1b_chunks "$(sed -n 2p <<<"$out")" \
  "chunks (partitioned by cost): 0 = embed..h.0 (stage 0), 1 = h.1 (stage 1), 2 = h.2 (stage 2), 3 = h.3..head (stage 3)"
expect_eq pipeline_1f1b_stage0 "$(grep '^stage 0:' <<<"$out")" \
  "stage 0: bubble fraction 0.2000, peak in-flight activations 4, peak kept unit activations 8"
expect_eq pipeline_1f1b_stage1 "$(grep '^stage 1:' <<<"$out")" \
  "stage 1: bubble fraction 0.6000, peak in-flight activations 3, peak kept unit activations 3"
expect_eq pipeline_1f1b_stage2 "$(grep '^stage 2:' <<<"$out")" \
  "stage 2: bubble fraction 0.6000, peak in-flight activations 2, peak kept unit activations 2"
expect_eq pipeline_1f1b_stage3 "$(grep '^stage 3:' <<<"$out")" \
  "stage 3: bubble fraction 0.2000, peak in-flight activations 1, peak kept unit activations 2"
expect_eq pipeline_1f1b_overall "$(grep '^overall:' <<<"$out")" "overall: bubble fraction 0.4000, makespan 60"
expect_eq pipeline_1f1b_verdict "$(tail -1 <<<"$out")" "step programs of 4 ranks simulated: OK"
# Two stages of ZB-H1 at dp 2: equal chunks, so the closed form
# (p - 1)/(3m + p - 1) = 1/25 on both.
out=$("$bin" schedule "$demo" --world-size 4 --set engine.parallel.dp=2 --set engine.parallel.pp=2 \
  --set engine.parallel.pipeline_schedule=ZERO_BUBBLE_H1 --set engine.gradient_accumulation_steps=8 --simulate 2>&1)
expect_eq pipeline_zb_rc $? 0
expect_eq pipeline_zb_stage0 "$(grep '^stage 0:' <<<"$out")" \
  "stage 0: bubble fraction 0.0400, peak in-flight activations 2, peak kept unit activations 6"
expect_eq pipeline_zb_stage1 "$(grep '^stage 1:' <<<"$out")" \
  "stage 1: bubble fraction 0.0400, peak in-flight activations 2, peak kept unit activations 6"
expect_eq pipeline_zb_overall "$(grep '^overall:' <<<"$out")" "overall: bubble fraction 0.0400, makespan 75"
expect_eq pipeline_zb_timeline "$(grep '^stage 1 |' <<<"$out")" \
  "stage 1 |..F0B0F1B1W0F2B2W1F3B3W2F4B4W3F5B5W4F6B6W5F7B7W6W7|"
# Without --simulate: the program of one rank of the last stage (the demo
# sets reshard_after_forward, so ZeRO-3 gathers per micro-batch and pass).
out=$("$bin" schedule "$demo" "${pp4[@]}" --rank 3 2>&1)
expect_eq pipeline_program_rc $? 0
expect_eq pipeline_program_header "$(head -1 <<<"$out" | sed 's/.*; dp=/dp=/')" \
  "dp=1, pp=4 (ONE_F_ONE_B), ZeRO stage 3, 8 micro-batches; train program of rank 3 (stage 3, dp rank 0): 6 units, 1 bucket, 154 actions"
expect_eq pipeline_program_begin "$(sed -n 2p <<<"$out")" "BEGIN_STEP"
# A micro-batch of 2 rows x 64 tokens x 128 channels in f32: 65536 bytes.
expect_eq pipeline_program_first "$(sed -n 3p <<<"$out")" "RECV_ACT mb=0 unit=h.3 peer=2 bytes=65536"
expect_eq pipeline_program_verdict "$(tail -1 <<<"$out")" "  verdict: OK"
# check-config accepts the pipeline and names its schedule.
expect pipeline_check_config 0 "pipeline   ONE_F_ONE_B, 1 chunk(s) per stage, partition by cost" -- \
  "$bin" check-config "$demo" "${pp4[@]}"
expect pipeline_bad_costs 2 "--costs: '1,1' is not three numbers" -- "$bin" schedule "$demo" "${pp4[@]}" --costs 1,1
finish_cases
