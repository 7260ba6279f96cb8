# Sourced by tools/test: openblas_runnable_cores prints the OpenBLAS core
# types (OPENBLAS_CORETYPE values) whose kernels this CPU can execute, one a
# line: Prescott (OpenBLAS's generic x86-64 kernels) everywhere on x86-64,
# Haswell and Zen with AVX2 and FMA, SkylakeX with AVX-512 (F, BW, VL, DQ,
# CD), Cooperlake with AVX-512 BF16 as well (OpenBLAS's own pick on such
# CPUs). Elsewhere (not x86-64) it prints nothing: OpenBLAS picks its own.
openblas_runnable_cores() {
  [ "$(uname -m)" = x86_64 ] || return 0
  local flags
  flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
  _zs_has_all() {
    local f
    for f in "$@"; do
      case "$flags" in *" $f "*) ;; *) return 1 ;; esac
    done
  }
  echo Prescott
  if _zs_has_all avx2 fma; then
    echo Haswell
    echo Zen
  fi
  if _zs_has_all avx512f avx512bw avx512vl avx512dq avx512cd; then
    echo SkylakeX
    if _zs_has_all avx512_bf16; then echo Cooperlake; fi
  fi
  unset -f _zs_has_all
}
