#!/usr/bin/env bash
# run_replay.sh REPLAY_BINARY ARGS...: runs the gcc-built fuzz replay; a crash
# or abort (non-zero exit) fails the test.
set -u
"$@"
