#!/usr/bin/env bash
# Builds and runs the activation checkpointing benchmark on one rank and
# prints a markdown table. Usage: bench/activation_checkpointing/run.sh [ac_bench flags]
# BAZEL_ROOT picks the Bazel output root; BAZEL_FLAGS adds build flags.
set -euo pipefail
cd "$(dirname "$0")/../.."
bazel_cmd=(bazel)
if [ -n "${BAZEL_ROOT:-}" ]; then bazel_cmd+=(--output_user_root="$BAZEL_ROOT"); fi
read -r -a extra <<< "${BAZEL_FLAGS:-}"
"${bazel_cmd[@]}" build --symlink_prefix=/ "${extra[@]}" //bench/activation_checkpointing:ac_bench >&2
bin="$("${bazel_cmd[@]}" info "${extra[@]}" bazel-bin 2>/dev/null)/bench/activation_checkpointing/ac_bench"
. bazel/mpirun_local.sh
mpirun "${mpirun_flags[@]}" -np 1 "$bin" "$@"
