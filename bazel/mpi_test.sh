#!/usr/bin/env bash
# Runs a gtest binary under mpirun: mpi_test.sh NP BINARY MERGER [ARGS...]
# Each rank writes rank_<r>.xml; the merger combines them into Bazel's
# $XML_OUTPUT_FILE so a test case fails if it failed on any rank, and adds a
# failing case when mpirun itself failed (a crash, an abort, a hang killed).
set -u
np=$1 binary=$2 merger=$3
shift 3
outdir=${TEST_TMPDIR:-$(mktemp -d)}/mpi_xml
rm -rf "$outdir" && mkdir -p "$outdir"
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/mpirun_local.sh"
export ZEROSHARD_TEST_NP=$np
mpirun "${mpirun_flags[@]}" -np "$np" bash -c \
  'exec "$0" --gtest_output="xml:$1/rank_${OMPI_COMM_WORLD_RANK}.xml" "${@:2}"' \
  "$binary" "$outdir" "$@"
rc=$?
if [ -n "${XML_OUTPUT_FILE:-}" ]; then
  python3 "$merger" --np "$np" --mpirun_rc "$rc" --out "$XML_OUTPUT_FILE" "$outdir"/rank_*.xml || rc=1
fi
exit $rc
