#!/usr/bin/env bash
# train_gpt2 with engine.device.type CUDA on a machine without a usable GPU:
# every rank exits non-zero with one agreed error naming the rank and the
# CUDA error, nothing crashes; configs for CUDA validate; the binaries load
# without a driver (libcuda is opened at run time by the CUDA runtime).
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
bin=$1 config=$2 corpus=$3 zeroshard=$4
tmp=${TEST_TMPDIR:-$(mktemp -d)}
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/mpirun_local.sh"
common=(--set "data.train_path=$corpus" --set "data.val_path=$corpus" --set engine.device.type=CUDA)

if ldd "$bin" | grep -q 'libcuda\.so'; then
  record_case does_not_link_the_driver 0 "$(ldd "$bin" | grep libcuda)"
else
  record_case does_not_link_the_driver 1
fi

expect check_config_accepts_cuda 0 "type: CUDA" -- "$zeroshard" check-config "$config" --set engine.device.type=CUDA
expect check_config_accepts_gpu_id 0 "gpu_id: 1" -- "$zeroshard" check-config "$config" \
  --set engine.device.type=CUDA --set engine.device.gpu_id=1
expect check_config_rejects_gpu_id_on_cpu 2 "engine.device.gpu_id: set but engine.device.type is CPU" -- \
  "$zeroshard" check-config "$config" --set engine.device.gpu_id=0

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  reason="a GPU is usable here, so the no-GPU error cannot be shown (tools/gpu-check runs the GPU path)"
  for c in every_rank_exits_non_zero one_agreed_error_line no_crash; do skip_case "$c" "$reason"; done
  finish_cases
fi

# Each rank records its own exit code (mpirun must not kill the others first).
timeout 120 mpirun "${mpirun_flags[@]}" --mca orte_abort_on_non_zero_status 0 -np 3 sh -c '"$@"; r=$?; echo "rank $OMPI_COMM_WORLD_RANK exit $r" >>"'"$tmp"'/ranks.txt"; exit $r' \
  sh "$bin" --config "$config" "${common[@]}" --set engine.parallel.dp=3 --set data.batch_size=6 --steps 2 >"$tmp/run.log" 2>&1
rc=$?
codes=$(sort "$tmp/ranks.txt" 2>/dev/null | tr '\n' ' ')
failed_ranks=$(grep -c ' exit 1$' "$tmp/ranks.txt" 2>/dev/null)
record_case every_rank_exits_non_zero $((${failed_ranks:-0} == 3)) \
  "mpirun rc=$rc, ranks: $codes; $(tail -5 "$tmp/run.log")"
errors=$(grep -c 'binding the CUDA device' "$tmp/run.log")
grep -qE '^train_gpt2: binding the CUDA device failed on world rank 0: engine\.device\.type CUDA: .*cuda[A-Za-z]+' \
  "$tmp/run.log"
st=$?
record_case one_agreed_error_line $((st == 0 && errors == 1)) "$errors error lines: $(cat "$tmp/run.log")"
grep -qE 'core dumped|Segmentation fault|exited on signal|terminate called' "$tmp/run.log"
st=$?
record_case no_crash $((st != 0)) "$(cat "$tmp/run.log")"
finish_cases
