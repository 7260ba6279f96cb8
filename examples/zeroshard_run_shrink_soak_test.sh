#!/usr/bin/env bash
# Long tier: a 300-step `zeroshard run` at dp 4 from a hostfile of 4 slots.
# After step 100 the test cuts the hostfile to 2 slots (a lost host) and
# kills a rank: the supervisor restarts at dp 2 with gradient accumulation 2
# (the same global batch), resharding the checkpoint, and finishes. Reports
# the relative L2 distance of the consolidated weights to the uninterrupted
# dp 4 run (not bitwise: another reduction order).
# Usage: zeroshard_run_shrink_soak_test.sh TRAIN_GPT2 CONFIG CORPUS ZEROSHARD
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
bin=$1 config=$2 corpus=$3 zeroshard=$4
tmp=${TEST_TMPDIR:-$(mktemp -d)}
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/mpirun_local.sh"
export OMPI_MCA_btl=self,vader OMPI_MCA_hwloc_base_binding_policy=none OMPI_MCA_rmaps_base_oversubscribe=1
steps=300
common=(--config "$config" --set "data.train_path=$corpus" --set "data.val_path=$corpus" --set eval_interval=0
  --set steps=$steps --set engine.parallel.dp=4 --set data.batch_size=8 --set engine.checkpoint.interval=10
  --set engine.logging.interval=1 --set model.n_embd=128 --set model.n_head=4 --set model.seq_len=64)

timeout 1200 mpirun "${mpirun_flags[@]}" -np 4 "$bin" "${common[@]}" --set "engine.checkpoint.dir=$tmp/ckA" \
  >"$tmp/whole.log" 2>&1
rc_whole=$?

export ZS_PID_DIR=$tmp/pids
mkdir -p "$ZS_PID_DIR"
wrapper=$tmp/rank_wrapper.sh
cat >"$wrapper" <<'SH'
#!/usr/bin/env bash
echo $$ >"$ZS_PID_DIR/rank.${OMPI_COMM_WORLD_RANK:-0}"
exec "$@"
SH
chmod +x "$wrapper"
hosts=$tmp/hosts
echo "localhost slots=4" >"$hosts"
ck=$tmp/ckB
(
  for _ in $(seq 1 12000); do [ -d "$ck/step_100" ] && break; sleep 0.05; done
  echo "localhost slots=2" >"$hosts"
  kill -9 "$(cat "$ZS_PID_DIR/rank.3")"
) &
fault_pid=$!
timeout 1200 "$zeroshard" run --np 4 --min-np 2 --hostfile "$hosts" --max-restarts 2 -- "$wrapper" "$bin" \
  "${common[@]}" --set "engine.checkpoint.dir=$ck" >"$tmp/supervised.log" 2>&1
rc=$?
wait $fault_pid
line=$(grep "^zeroshard run: restart " "$tmp/supervised.log")
[[ "$line" =~ ^"zeroshard run: restart 1/2 after rank 3 signal 9 (Killed) at step "[0-9]+"; resuming from step "[0-9]+" with dp 2"$ ]]
restarted=$?
grep -q "^zeroshard: resumed from $ck/step_[0-9]* at step [0-9]* (resharded from dp 4 tp 1 pp 1)" "$tmp/supervised.log"
resharded=$?
echo "measured: $line"
record_case shrinks_to_dp2_after_a_lost_host $((rc_whole == 0 && rc == 0 && restarted == 0 && resharded == 0)) \
  "rc $rc_whole $rc: $line $(grep -v '^step ' "$tmp/supervised.log" | tail -20)"

"$zeroshard" ckpt consolidate "$tmp/ckA/step_$steps" --out "$tmp/a.safetensors" >/dev/null 2>&1
"$zeroshard" ckpt consolidate "$ck/step_$steps" --out "$tmp/b.safetensors" >/dev/null 2>&1
report=$(python3 - "$tmp/a.safetensors" "$tmp/b.safetensors" <<'PY'
import array, json, math, struct, sys
def load(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        out[name] = array.array("f", raw[8 + n + b:8 + n + e])
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys()
num = sum((x - y) ** 2 for k in a for x, y in zip(a[k], b[k]))
den = sum(x * x for k in a for x in a[k])
rel = math.sqrt(num / den)
print(f"relative L2 of consolidated weights, shrunk vs uninterrupted: {rel:.3e}")
sys.exit(0 if rel < 0.05 else 1)
PY
)
st=$?
echo "measured: $report"
record_case shrunk_run_stays_close_to_the_uninterrupted_one $((st == 0)) "$report"
finish_cases
