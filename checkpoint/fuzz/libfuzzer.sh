#!/usr/bin/env bash
# Builds the checkpoint fuzz targets with clang-14's libFuzzer plus ASan and
# UBSan, and runs each for SECONDS (default 60) on a copy of its corpus.
# Needs clang-14 and libclang-rt-14-dev (Debian). Run from the repository root:
#   checkpoint/fuzz/libfuzzer.sh /tmp/ckpt_fuzz 60
# Uses the generated protobuf sources of a Bazel build under the given output
# root (BAZEL_OUTPUT_ROOT, default /root/.cache/bazel_ckpt).
set -eu
out=${1:?usage: libfuzzer.sh OUT_DIR [SECONDS]}
seconds=${2:-60}
root=${BAZEL_OUTPUT_ROOT:-/root/.cache/bazel_ckpt}
bazel --output_user_root="$root" build --symlink_prefix=/ //proto:checkpoint_cc_proto >/dev/null 2>&1
gen=$(bazel --output_user_root="$root" info bazel-bin 2>/dev/null)
mkdir -p "$out"
absl_libs="-labsl_statusor -labsl_status -labsl_cord -labsl_cordz_info -labsl_cordz_handle -labsl_cordz_functions
  -labsl_cord_internal -labsl_exponential_biased -labsl_synchronization -labsl_graphcycles_internal -labsl_time
  -labsl_civil_time -labsl_time_zone -labsl_str_format_internal -labsl_strings -labsl_strings_internal -labsl_hash
  -labsl_city -labsl_low_level_hash -labsl_raw_hash_set -labsl_symbolize -labsl_demangle_internal -labsl_stacktrace
  -labsl_debugging_internal -labsl_malloc_internal -labsl_int128 -labsl_throw_delegate -labsl_base
  -labsl_spinlock_wait -labsl_raw_logging_internal -labsl_log_severity -labsl_bad_optional_access
  -labsl_bad_variant_access -labsl_strerror -lprotobuf -lpthread"
flags="-std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -I. -I$gen"
clang++-14 $flags checkpoint/fuzz/safetensors_fuzz.cc checkpoint/safetensors.cc checkpoint/crc32c.cc core/dtype.cc \
  core/file_io.cc -o "$out/safetensors_fuzz" $absl_libs
clang++-14 $flags checkpoint/fuzz/manifest_fuzz.cc checkpoint/manifest.cc checkpoint/crc32c.cc \
  sharding/flat_param_layout.cc "$gen/proto/checkpoint.pb.cc" "$gen/proto/config.pb.cc" \
  -o "$out/manifest_fuzz" $absl_libs
for target in safetensors manifest; do
  rm -rf "$out/corpus_$target" && cp -r "checkpoint/fuzz/corpus/$target" "$out/corpus_$target"
  "$out/${target}_fuzz" -max_total_time="$seconds" -print_final_stats=1 "$out/corpus_$target"
done
