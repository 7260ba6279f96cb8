#!/usr/bin/env bash
# Builds and runs the tensor-parallel benchmark on one world of N ranks
# (every dp x tp layout of it) and prints markdown tables.
# Usage: bench/tp/run.sh [N] [-- tp_bench flags] (default N = 4).
# BAZEL_ROOT picks the Bazel output root (default: Bazel's own); BAZEL_FLAGS
# adds build flags (e.g. --//bazel:cuda=false to skip nvcc).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tools/lib/openblas_env.sh
np=4
if [ $# -gt 0 ] && [ "$1" != "--" ]; then np=$1; shift; fi
[ "${1:-}" = "--" ] && shift
. bench/common/build_bench.sh
build_bench //bench/tp:tp_bench
bin=$bench_bin
. bazel/mpirun_local.sh
mpirun "${mpirun_flags[@]}" -np "$np" "$bin" "$@"
