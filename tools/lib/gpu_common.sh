# shellcheck shell=bash
# Sourced by tools/gpu-check and tools/gpu-bundle, from the repository root.

# The targets of the bundle check besides the gpu-tagged tests (part, label);
# a label whose package or target does not exist yet is recorded as absent.
ZS_GPU_FIXED_TARGETS=(
  "comm //tests:comm_conformance_test_bin"
  "engine //tests/gpu:engine_cuda_test_bin"
  "engine //tests/gpu:host_offload_cuda_test_bin"
  "parity //tests/gpu:gpu_cpu_parity_test_bin"
  "bench //bench/gpu:gpt2_gpu_bench"
  "bench //bench/gpu:host_offload_bench"
)

# Prints a Bazel query universe over every package under the real top-level
# directories: not //..., since stray bazel-* convenience symlinks in the
# tree would be crawled and fail to load.
zs_gpu_universe() {
  local d patterns=()
  for d in */; do
    d=${d%/}
    [ -L "$d" ] && continue
    case "$d" in bazel-* | third_party | gpu_bundle*) continue ;; esac
    if [ -n "$(find "$d" \( -name BUILD -o -name BUILD.bazel \) -print -quit)" ]; then patterns+=("//$d/..."); fi
  done
  local universe
  universe=$(printf ' + %s' "${patterns[@]}")
  echo "${universe:3}"
}

# Every test tagged "gpu" (labels, one a line). $1: the bazel command.
zs_gpu_tagged_tests() {
  local -a bazel_cmd=("$@")
  "${bazel_cmd[@]}" query --keep_going "attr(tags, '\\bgpu\\b', tests($(zs_gpu_universe)))" 2>/dev/null | grep '^//'
}

# Human-readable size of $1 bytes.
zs_gpu_mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

# What a shared library name is to the bundle: "glibc" (the C library and
# its loader: every Linux has its own), "cuda" (CUDA, NCCL and driver
# libraries: the GPU machine has its own, matched to its driver) or "bundle".
zs_gpu_lib_kind() {
  case "$1" in
    linux-vdso.so* | linux-gate.so* | ld-linux* | libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | \
      libresolv.so.* | libutil.so.* | libanl.so.* | libmvec.so.* | libnsl.so.* | libnss_* | libthread_db.so.* | \
      libBrokenLocale.so.* | libc_malloc_debug.so.*)
      echo glibc ;;
    libcuda.so* | libcudart.so* | libcublas.so* | libcublasLt.so* | libnccl.so* | libnvidia-* | libnvrtc* | \
      libnvJitLink* | libcudnn* | libcufft* | libcurand* | libcusparse* | libcusolver* | libcupti* | libnvToolsExt* | \
      libnvshmem* | libcufile*)
      echo cuda ;;
    *) echo bundle ;;
  esac
}
