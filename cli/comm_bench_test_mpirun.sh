#!/usr/bin/env bash
# Runs comm_bench_main under mpirun (2 ranks, tiny sizes) and checks the
# table: a header per op, a row per size with a ratio, and the latency line.
set -u
bench=$1
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/mpirun_local.sh"
out=${TEST_TMPDIR:-$(mktemp -d)}/bench.txt
timeout 60 mpirun "${mpirun_flags[@]}" -np 2 "$bench" --min-bytes=8 --max-bytes=128 --iters=3 --warmup=1 >"$out" 2>&1
rc=$?
cat "$out"
fail() { echo "FAIL: $*"; exit 1; }
[ "$rc" -eq 0 ] || fail "comm_bench_main exited $rc"
for op in all_reduce all_gather reduce_scatter broadcast; do
  grep -q "^# $op" "$out" || fail "no table for $op"
done
# 8, 32, 128 bytes per op: 3 rows x 4 ops, each ending in a ratio.
rows=$(grep -cE '^ +[0-9]+ +[0-9]+ \| .* \| +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}$' "$out")
[ "$rows" -eq 12 ] || fail "expected 12 table rows, found $rows"
grep -qE '^# one-element all_reduce latency \([0-9]+ iters\): ours [0-9.]+ us, raw [0-9.]+ us, ours/raw [0-9.]+ \(min: ours [0-9.]+ us, raw [0-9.]+ us\)$' "$out" ||
  fail "no latency line"
# Bad usage exits 2 without starting MPI.
"$bench" --backend=gloo >/dev/null 2>&1
[ $? -eq 2 ] || fail "bad --backend did not exit 2"
echo PASS
