# Sourced by the supervisor's soak tests (after bazel/sh_test_cases.sh and
# bazel/mpirun_local.sh): one `zeroshard run` under examples/fault_injector.py
# against the same run uninterrupted (docs/resilience_supervisor.md).
#
#   fault_soak NAME NP STEPS INTERVAL KILLS CORRUPTS STOPS FILLS TERMS -- TRAINER_ARGS...
#
# needs $bin (train_gpt2), $zeroshard, $injector and $tmp. The checkpoint
# root lives on a small tmpfs the function mounts (root only; without it the
# fill is skipped visibly and the root is an ordinary directory) and
# unmounts on exit, also when the test fails. Records the cases
# NAME_finishes, NAME_every_fault_restarts_once_with_its_cause and
# NAME_ends_bitwise_equal, and prints the injector's table.

_fault_soak_mounts=()
_fault_soak_dirs=()
_fault_soak_pids=()
_fault_soak_cleanup() {
  local p m
  for p in "${_fault_soak_pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  for m in "${_fault_soak_mounts[@]}"; do umount -l "$m" 2>/dev/null; done
  for m in "${_fault_soak_dirs[@]}"; do rm -rf "$m"; done
}
trap _fault_soak_cleanup EXIT

fault_soak() {
  local name=$1 np=$2 steps=$3 interval=$4 kills=$5 corrupts=$6 stops=$7 fills=$8 terms=$9
  shift 10
  local args=("$@" --set "steps=$steps" --set "engine.checkpoint.interval=$interval"
    --set "engine.parallel.dp=$np" --set engine.logging.interval=1)
  local dir=$tmp/$name
  mkdir -p "$dir/pids"
  timeout 300 mpirun "${mpirun_flags[@]}" -np "$np" "$bin" "${args[@]}" \
    --set "engine.checkpoint.dir=$dir/ckA" >"$dir/whole.log" 2>&1
  local rc_whole=$?

  # The mount lives under /tmp, not the test's directory: one a crash left
  # behind must not sit inside the build tree.
  local fs ck fill_dir=""
  fs=$(mktemp -d "/tmp/zs_${name}_XXXXXX")
  _fault_soak_dirs+=("$fs")
  if [ "$fills" -gt 0 ] && [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=32m tmpfs "$fs" 2>"$dir/mount.log"; then
    _fault_soak_mounts+=("$fs")
    fill_dir=$fs
  elif [ "$fills" -gt 0 ]; then
    skip_case "${name}_full_checkpoint_disk" "needs root to mount a tmpfs: $(id -un) $(cat "$dir/mount.log" 2>/dev/null)"
    fills=0
  fi
  ck=$fs/ck
  local seed
  seed=$(test_seed "$name")
  echo "fault soak $name: seed $seed (ZS_TEST_SEED=$seed reruns it)"
  timeout 300 "$zeroshard" run --np "$np" --max-restarts $((kills + stops + fills + terms + 1)) -- \
    python3 "$injector" exec "$dir/pids" "$bin" "${args[@]}" --set "engine.checkpoint.dir=$ck" \
    --set "engine.logging.metrics_path=$dir/metrics.jsonl" \
    >"$dir/supervised.log" 2>&1 &
  local sup=$!
  _fault_soak_pids+=("$sup")
  python3 "$injector" inject --seed "$seed" --log "$dir/supervised.log" --ckpt "$ck" --pids "$dir/pids" \
    --np "$np" --steps "$steps" --interval "$interval" --watch-pid "$sup" --report "$dir/report.json" \
    --metrics "$dir/metrics.jsonl" \
    --kills "$kills" --corrupts "$corrupts" --stops "$stops" --fills "$fills" ${fill_dir:+--fill-dir "$fill_dir"} \
    --terms "$terms" >"$dir/injector.log" 2>&1 &
  local inj=$!
  wait "$sup"
  local rc=$?
  wait "$inj"
  local rc_inj=$?
  # Whatever the attempt left running (nothing, if the supervisor is right).
  for p in "$dir"/pids/rank.*; do [ -e "$p" ] && _fault_soak_pids+=("$(cat "$p")"); done

  record_case "${name}_finishes" $((rc_whole == 0 && rc == 0 && rc_inj == 0)) \
    "rc whole $rc_whole supervised $rc injector $rc_inj: $(cat "$dir/injector.log") $(grep -v '^step ' "$dir/supervised.log" | tail -40)"
  local table
  table=$(python3 "$injector" check --report "$dir/report.json" --log "$dir/supervised.log" --ckpt "$ck" \
    --interval "$interval" 2>&1)
  local st=$?
  echo "measured ($name, seed $seed, load $(cut -d' ' -f1-3 /proc/loadavg)):"
  echo "$table"
  record_case "${name}_every_fault_restarts_once_with_its_cause" $((st == 0)) \
    "$table $(grep '^zeroshard run:' "$dir/supervised.log")"
  "$zeroshard" ckpt diff "$dir/ckA/step_$steps" "$ck/step_$steps" --tol 0 >"$dir/diff.log" 2>&1
  st=$?
  record_case "${name}_ends_bitwise_equal" $((st == 0)) "diff rc $st: $(tail -5 "$dir/diff.log")"
  cp "$dir/supervised.log" "$dir/report.json" "${TEST_UNDECLARED_OUTPUTS_DIR:-$dir}/" 2>/dev/null
  return 0
}
