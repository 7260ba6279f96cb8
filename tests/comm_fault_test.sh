#!/usr/bin/env bash
# Runs comm_fault_driver under mpirun in a job that must fail, and checks the
# exit status, the exact message, and that it failed within 2 × the timeout.
# Usage: comm_fault_test.sh mismatch|timeout|timeout_unchecked|timeout_silent DRIVER
#
# The 2 × bound covers the watchdog's own latency: the timeout (3 s), its check
# period (timeout/20 = 150 ms) and, without debug_checks, the peer query
# (answers in ~20 ms; a silent rank is waited for ArrivalQueryBound = timeout/4
# = 750 ms), then mpirun's teardown: about 4 s in the worst mode.
set -u
mode=$1 driver=$2
np=4
timeout_s=3
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/mpirun_local.sh"
log=${TEST_TMPDIR:-$(mktemp -d)}/fault_$mode.log

# The outer bound: nothing here may hang.
timeout 60 mpirun "${mpirun_flags[@]}" -np "$np" "$driver" "$mode" "$timeout_s" >"$log" 2>&1
rc=$?
end_ms=$(date +%s%3N)
echo "--- mpirun exited with $rc; output:"
cat "$log"
echo "---"
fail() { echo "FAIL: $*"; exit 1; }

[ "$rc" -ne 0 ] || fail "the job exited 0; expected a failure"
[ "$rc" -ne 124 ] || fail "the job hung until the outer 60 s bound"
begin_ms=$(sed -n 's/^fault_begin_ms=//p' "$log" | head -1)
[ -n "$begin_ms" ] || fail "rank 0 never reached the faulty step"
elapsed=$((end_ms - begin_ms))
limit=$((2 * timeout_s * 1000))
echo "failed ${elapsed} ms after the faulty step began (limit ${limit} ms)"
[ "$elapsed" -lt "$limit" ] || fail "took ${elapsed} ms, more than 2 x the ${timeout_s} s timeout"

expect_line() {
  grep -qxF -- "$1" "$log" || fail "missing line: $1"
}
case "$mode" in
  mismatch)
    msg="collective #2 mismatch in group world: ranks 0,2,3 called ReduceScatter(f32, 4096), rank 1 called AllGather(f32, 1024)"
    for r in 0 1 2 3; do expect_line "[rank $r] $msg"; done
    ;;
  timeout)
    msg="zeroshard: collective #2 AllReduce(f32, 1024) in group world did not finish within 3s; rank that never arrived: 3; aborting the job"
    grep -F -- "$msg" "$log" | grep -qE '^\[rank [012]\] ' || fail "missing line: [rank 0|1|2] $msg"
    [ "$rc" -eq 70 ] || fail "exit status $rc; expected the watchdog's 70"
    ;;
  timeout_unchecked)
    msg="zeroshard: collective #2 AllReduce(f32, 1024) in group world did not finish within 3s; rank that never arrived: 3; aborting the job"
    grep -F -- "$msg" "$log" | grep -qE '^\[rank [012]\] ' || fail "missing line: [rank 0|1|2] $msg"
    [ "$rc" -eq 70 ] || fail "exit status $rc; expected the watchdog's 70"
    ;;
  timeout_silent)
    msg="zeroshard: collective #2 AllReduce(f32, 1024) in group world did not finish within 3s; rank 3 did not answer (dead or stuck); aborting the job"
    grep -F -- "$msg" "$log" | grep -qE '^\[rank [012]\] ' || fail "missing line: [rank 0|1|2] $msg"
    [ "$rc" -eq 70 ] || fail "exit status $rc; expected the watchdog's 70"
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo "PASS"
