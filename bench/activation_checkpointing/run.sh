#!/usr/bin/env bash
# Builds and runs the activation checkpointing benchmark on one rank and
# prints a markdown table. Usage: bench/activation_checkpointing/run.sh [ac_bench flags]
# BAZEL_ROOT picks the Bazel output root; BAZEL_FLAGS adds build flags.
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/common/build_bench.sh
build_bench //bench/activation_checkpointing:ac_bench
bin=$bench_bin
. bazel/mpirun_local.sh
mpirun "${mpirun_flags[@]}" -np 1 "$bin" "$@"
