#!/usr/bin/env bash
# Runs pipeline_fault_driver under mpirun (4 ranks, pp 4): the last stage
# stops before its first backward of step 2. The job must fail with the
# watchdog's exit status, within 2 x the comm timeout of the faulty step's
# start, naming a pipeline receive that waits and the rank it waits on.
# Usage: pipeline_fault_test.sh DRIVER
set -u
driver=$1
timeout_s=3
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/mpirun_local.sh"
log=${TEST_TMPDIR:-$(mktemp -d)}/pipeline_fault.log

timeout 60 mpirun "${mpirun_flags[@]}" -np 4 "$driver" "$timeout_s" >"$log" 2>&1
rc=$?
end_ms=$(date +%s%3N)
echo "--- mpirun exited with $rc; output:"
cat "$log"
echo "---"
fail() { echo "FAIL: $*"; exit 1; }

[ "$rc" -ne 0 ] || fail "the job exited 0; expected a failure"
[ "$rc" -ne 124 ] || fail "the job hung until the outer 60 s bound"
[ "$rc" -eq 70 ] || fail "exit status $rc; expected the watchdog's 70"
begin_ms=$(sed -n 's/^fault_begin_ms=//p' "$log" | head -1)
[ -n "$begin_ms" ] || fail "rank 0 never reached the faulty step"
elapsed=$((end_ms - begin_ms))
limit=$((2 * timeout_s * 1000))
echo "failed ${elapsed} ms after the faulty step began (limit ${limit} ms)"
[ "$elapsed" -lt "$limit" ] || fail "took ${elapsed} ms, more than 2 x the ${timeout_s} s timeout"
# Stage 2 (rank 2) waits for a gradient from stage 3 (rank 3) on the pp
# group, and the stages before it for gradients from theirs: whichever
# watchdog fires first aborts the job, so any of them may be the one that
# reports — but it must name its Recv and the next stage's rank.
named=0
for r in 0 1 2; do
  grep -E "^\[rank $r\] zeroshard: .*Recv\(.*from rank $((r + 1)) .* in group pp.*did not finish within 3s" "$log" \
    >/dev/null && named=1
done
[ "$named" = 1 ] || fail "missing a watchdog line of rank r naming its Recv from rank r + 1 in group pp"
echo "PASS"
