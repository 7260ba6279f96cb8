# Sourced by the benchmark scripts, from the repository root:
#   build_bench //PACKAGE:TARGET...   builds them; sets bench_bin_dir to
#                                     bazel-bin and bench_bin to the first
#                                     target's path.
# BAZEL_ROOT picks the Bazel output root (default: Bazel's own); BAZEL_FLAGS
# adds build flags (e.g. --//bazel:cuda=false to skip nvcc). The build makes
# no bazel-* symlinks, so a benchmark can build beside a running Bazel.
build_bench() {
  local first=${1#//}
  local cmd=(bazel) extra=()
  if [ -n "${BAZEL_ROOT:-}" ]; then cmd+=(--output_user_root="$BAZEL_ROOT"); fi
  read -r -a extra <<< "${BAZEL_FLAGS:-}"
  "${cmd[@]}" build --symlink_prefix=/ "${extra[@]}" "$@" >&2
  bench_bin_dir="$("${cmd[@]}" info "${extra[@]}" bazel-bin 2>/dev/null)"
  bench_bin="$bench_bin_dir/${first/://}"
}
