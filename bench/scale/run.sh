#!/usr/bin/env bash
# Builds and runs the hybrid sharding / int8 communication benchmark on one
# world of N ranks (dp N, the five variants interleaved) and prints markdown
# tables.
# Usage: bench/scale/run.sh [N] [-- scale_bench flags] (default N = 4).
# BAZEL_ROOT picks the Bazel output root (default: Bazel's own); BAZEL_FLAGS
# adds build flags (e.g. --//bazel:cuda=false to skip nvcc).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tools/lib/openblas_env.sh
np=4
if [ $# -gt 0 ] && [ "$1" != "--" ]; then np=$1; shift; fi
[ "${1:-}" = "--" ] && shift
. bench/common/build_bench.sh
build_bench //bench/scale:scale_bench
bin=$bench_bin
. bazel/mpirun_local.sh
mpirun "${mpirun_flags[@]}" -np "$np" "$bin" "$@"
