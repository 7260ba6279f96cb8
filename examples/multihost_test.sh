#!/usr/bin/env bash
# train_gpt2 on a cluster of two network-namespace hosts x 2 ranks
# (tools/cluster): bitwise the same training as 4 ranks on one host at every
# ZeRO stage; PER_HOST is hybrid sharding over one host's ranks; the hosts
# are reported; the cluster always comes down and leaves nothing behind.
# Needs root with CAP_NET_ADMIN; skips each case with the reason otherwise.
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
bin=$1 config=$2 corpus=$3 cluster=$5
tmp=${TEST_TMPDIR:-$(mktemp -d)}
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/mpirun_local.sh"
common=(--config "$config" --set "data.train_path=$corpus" --set "data.val_path=$corpus" --set engine.parallel.dp=4
  --set engine.logging.interval=1 --set data.batch_size=8 --steps 4)
cases=(down_is_idempotent trains_bitwise_as_one_host_stage0 trains_bitwise_as_one_host_stage1
  trains_bitwise_as_one_host_stage2 trains_bitwise_as_one_host_stage3 per_host_is_shard_group_of_one_host
  hosts_reported per_host_refuses_uneven_hosts cluster_down_leaves_nothing)

source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/cluster_test_guard.sh"
skip_unless_cluster_free "$cluster" "${cases[@]}"

"$cluster" down >"$tmp/down0.log" 2>&1 && "$cluster" down >>"$tmp/down0.log" 2>&1
record_case down_is_idempotent $(($? == 0)) "$(cat "$tmp/down0.log")"

trap '"$cluster" down >/dev/null 2>&1' EXIT
"$cluster" up --hosts 2 --slots 2 --link 1gbit >"$tmp/up.log" 2>&1 || { cat "$tmp/up.log"; exit 1; }

on_cluster() {  # on_cluster NP NAME ARGS...  -> rc; log in $tmp/NAME.log
  local np=$1 name=$2
  shift 2
  timeout 120 "$cluster" run --np "$np" -- "$bin" "$@" >"$tmp/$name.log" 2>&1
  rc=$?
}
on_one_host() {  # on_one_host NAME ARGS...
  local name=$1
  shift
  timeout 120 mpirun "${mpirun_flags[@]}" -np 4 "$bin" "$@" >"$tmp/$name.log" 2>&1
  rc=$?
}
# same_losses A.jsonl B.jsonl: every step's loss and grad norm equal as
# written (the writer prints floats round-trip exactly).
same_losses() {
  python3 - "$1" "$2" <<'PY'
import json, sys
rows = [[json.loads(l) for l in open(f)][1:] for f in sys.argv[1:]]
key = lambda rs: [(r["step"], r["loss"], r["grad_norm"]) for r in rs]
a, b = key(rows[0]), key(rows[1])
print(f"{len(a)} vs {len(b)} steps; first difference: {next(((x, y) for x, y in zip(a, b) if x != y), None)}")
sys.exit(0 if len(a) == 4 and a == b else 1)
PY
}

for stage in 0 1 2 3; do
  on_cluster 4 "c$stage" "${common[@]}" --set engine.zero.stage=$stage --set "engine.logging.metrics_path=$tmp/c$stage.jsonl"
  rc_c=$rc
  on_one_host "l$stage" "${common[@]}" --set engine.zero.stage=$stage --set "engine.logging.metrics_path=$tmp/l$stage.jsonl"
  rc_l=$rc
  cmp=$(same_losses "$tmp/c$stage.jsonl" "$tmp/l$stage.jsonl" 2>&1)
  st=$?
  record_case "trains_bitwise_as_one_host_stage$stage" $((rc_c == 0 && rc_l == 0 && st == 0)) \
    "rc $rc_c/$rc_l: $cmp $(tail -3 "$tmp/c$stage.log") $(tail -3 "$tmp/l$stage.log")"
done

on_cluster 4 per_host "${common[@]}" --set engine.zero.shard_group=PER_HOST --set "engine.logging.metrics_path=$tmp/ph.jsonl"
rc_c=$rc
on_one_host hsdp "${common[@]}" --set engine.zero.shard_group_size=2 --set "engine.logging.metrics_path=$tmp/hsdp.jsonl"
rc_l=$rc
cmp=$(same_losses "$tmp/ph.jsonl" "$tmp/hsdp.jsonl" 2>&1)
st=$?
grep -q "^zeroshard: data parallelism | hybrid sharding: groups of 2 dp ranks, 2 replicas$" "$tmp/per_host.log"
st_line=$?
record_case per_host_is_shard_group_of_one_host $((rc_c == 0 && rc_l == 0 && st == 0 && st_line == 0)) \
  "rc $rc_c/$rc_l line $st_line: $cmp $(head -5 "$tmp/per_host.log")"

header() { python3 -c 'import json,sys; h=json.loads(open(sys.argv[1]).readline()); print(h.get("hosts"), h.get("ranks_per_host"), h.get("shard_group_size"))' "$1"; }
h_c=$(header "$tmp/ph.jsonl") h_l=$(header "$tmp/hsdp.jsonl") h_flat=$(header "$tmp/c3.jsonl")
grep -q "^zeroshard: GPT-2 .* | world 4 = dp 4 x tp 1 x pp 1 | hosts 2 x 2 ranks | ZeRO stage" "$tmp/per_host.log"
st_c=$?
grep -q "| world 4 = dp 4 x tp 1 x pp 1 | hosts 1 x 4 ranks | ZeRO stage" "$tmp/hsdp.log"
st_l=$?
hdr_ok=$([ "$h_c" = "2 2 2" ] && [ "$h_l" = "1 4 2" ] && [ "$h_flat" = "2 2 None" ] && echo 1 || echo 0)
record_case hosts_reported $((hdr_ok == 1 && st_c == 0 && st_l == 0)) \
  "headers (hosts ranks_per_host shard_group_size): cluster PER_HOST '$h_c' (want 2 2 2), one host '$h_l' (want 1 4 2), cluster flat '$h_flat' (want 2 2 None); start-up lines $st_c/$st_l: $(grep -h '^zeroshard: GPT-2' "$tmp/per_host.log" "$tmp/hsdp.log")"

# 3 ranks on 2 slots per host: 2 on zs-h0, 1 on zs-h1.
on_cluster 3 uneven "${common[@]}" --set engine.parallel.dp=3 --set data.batch_size=12 --set engine.zero.shard_group=PER_HOST
want="engine.zero.shard_group: PER_HOST needs the same number of ranks on every host; ranks per host: host 0 (zs-h0) 2, host 1 (zs-h1) 1; use SIZE with engine.zero.shard_group_size"
record_case per_host_refuses_uneven_hosts $((rc != 0 && $(grep -cF "$want" "$tmp/uneven.log") == 1)) \
  "rc $rc: $(head -5 "$tmp/uneven.log")"

"$cluster" down >"$tmp/down.log" 2>&1
rc=$?
trap - EXIT
left=$( (ip netns list | grep '^zs-'; ip -o link show | grep -o 'zs-[^:@ ]*'; ls -d /run/zeroshard-cluster 2>/dev/null) || true)
record_case cluster_down_leaves_nothing $((rc == 0 && ${#left} == 0)) "rc $rc; left: $left $(cat "$tmp/down.log")"
finish_cases
