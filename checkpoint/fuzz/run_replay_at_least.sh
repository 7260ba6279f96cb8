#!/usr/bin/env bash
# run_replay_at_least.sh MIN REPLAY_BINARY ARGS...: the replay must exit 0
# and report at least MIN mutated inputs run (the long tier's count, not cut
# short by its time bound).
set -u
min=$1
shift
out=$("$@")
rc=$?
echo "$out"
[ "$rc" = 0 ] || exit "$rc"
ran=$(sed -n 's/^ran \([0-9]*\) mutated inputs without a crash$/\1/p' <<<"$out")
if [ -z "$ran" ] || [ "$ran" -lt "$min" ]; then
  echo "ran ${ran:-no} mutated inputs, expected at least $min"
  exit 1
fi
