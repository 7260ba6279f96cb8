# Sourced by the tools: picks OpenBLAS's kernels on CPUs it does not
# recognise. OpenBLAS 0.3.21 (Debian 12) falls back to its generic Prescott
# kernels on some virtualised Xeons that do have AVX-512 ("Intel(R) Xeon(R)
# Processor"): several times slower, and GEMM results then change with the
# thread count, which breaks the kernels' bitwise thread-independence. An
# OPENBLAS_CORETYPE already set is kept. Bazel passes it to tests
# (.bazelrc: --test_env), mpirun to every local rank.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -r /proc/cpuinfo ]; then
  _zs_flags=$(grep -m1 '^flags' /proc/cpuinfo)
  _zs_has() { case " $_zs_flags " in *" $1 "*) return 0 ;; esac; return 1; }
  if _zs_has avx512f && _zs_has avx512bw && _zs_has avx512vl && _zs_has avx512dq && _zs_has avx512cd; then
    export OPENBLAS_CORETYPE=SkylakeX
  fi
  unset -f _zs_has
  unset _zs_flags
fi
