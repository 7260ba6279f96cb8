#!/usr/bin/env bash
# tools/gpu-check --bundle: runs the GPU check from a bundle that
# tools/gpu-bundle made, with no Bazel (docs/gpu_check.md). Run by
# tools/gpu-check from the repository root, with its arguments.
set -uo pipefail
repo=$(pwd)
. tools/lib/openblas_env.sh
. tools/lib/gpu_common.sh

all_parts=(kernels comm engine parity bench sanitize)
default_parts=(kernels comm engine parity bench)
usage() {
  cat <<'EOF'
usage: tools/gpu-check --bundle DIR|FILE.tar.xz [--only PART...] [--require-gpu]
                       [--deadline SECONDS] [--report FILE]
  PART: kernels comm engine parity bench (the default), sanitize (only when
        named: compute-sanitizer memcheck, racecheck and synccheck over the
        hand-written kernels' tests)
  --require-gpu  a part whose every case skipped counts as failed
  --deadline     seconds for the whole check (default 300); runs past it fail
  --report       markdown summary (default bench/results/gpu.md)
  ZS_GPU_BENCH_ARGS: extra flags for both benchmarks (e.g. "--batch 8")
EOF
}

bundle_arg="" require_gpu=0 deadline=300 report=bench/results/gpu.md
only=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) case "${2:-}" in -* | '') ;; *) bundle_arg=$2; shift ;; esac ;;
    --bundle=*) bundle_arg=${1#--bundle=} ;;
    --only)
      while [ $# -gt 1 ] && [ "${2#-}" = "$2" ]; do only+=("$2"); shift; done ;;
    --only=*) IFS=, read -ra more <<<"${1#--only=}"; only+=("${more[@]}") ;;
    --require-gpu) require_gpu=1 ;;
    --deadline) deadline=${2:-}; shift ;;
    --report) report=${2:-}; [ -n "$report" ] || { usage >&2; exit 2; }; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
[ -n "$bundle_arg" ] || { usage >&2; exit 2; }
[ ${#only[@]} -eq 0 ] && only=("${default_parts[@]}")
for p in "${only[@]}"; do
  case " ${all_parts[*]} " in *" $p "*) ;; *) echo "gpu-check: unknown part '$p' (${all_parts[*]})" >&2; exit 2 ;; esac
done
case "$deadline" in '' | *[!0-9]*) echo "gpu-check: --deadline needs seconds" >&2; exit 2 ;; esac

# --- the bundle -------------------------------------------------------------
unpacked=""
cleanup() { [ -n "$unpacked" ] && rm -rf "$unpacked"; }
trap cleanup EXIT
tarball=""
if [ -f "$bundle_arg" ]; then
  tarball=$bundle_arg
elif [ -f "$bundle_arg/bundle.tar.xz" ]; then
  tarball=$bundle_arg/bundle.tar.xz
fi
if [ -n "$tarball" ]; then
  unpacked=$(mktemp -d /tmp/zs_gpu_bundle.XXXXXX)
  xz -dc "$tarball" | tar -C "$unpacked" -xf - || { echo "gpu-check: could not unpack $tarball" >&2; exit 1; }
  B=$unpacked/zs_gpu_bundle
  echo "gpu-check: unpacked $tarball into $B"
else
  B=$(cd "$bundle_arg" 2>/dev/null && pwd) || { echo "gpu-check: no bundle at $bundle_arg" >&2; exit 1; }
fi
if [ ! -f "$B/targets.tsv" ] || [ ! -f "$B/MANIFEST" ]; then
  echo "gpu-check: $B is not a bundle (no targets.tsv / MANIFEST; make one with tools/gpu-bundle)" >&2
  exit 1
fi
manifest() { sed -n "s/^$1: //p" "$B/MANIFEST" | head -n 1; }
bundle_commit=$(manifest git_commit)
echo "gpu-check: bundle of ${bundle_commit:-?}, built $(manifest built)"

# --- environment: the bundle's Open MPI and libraries, the machine's CUDA ----
orig_ld=${LD_LIBRARY_PATH:-}
[ -f "$B/ompi/env.sh" ] && . "$B/ompi/env.sh"
site_dirs=$(python3 -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null)
cuda_candidates=()
for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
  [ -n "$d" ] && cuda_candidates+=("$d/lib64" "$d/lib")
done
while read -r sp; do
  [ -n "$sp" ] || continue
  for d in "$sp"/nvidia/*/lib "$sp"/nvidia/*/lib64; do [ -d "$d" ] && cuda_candidates+=("$d"); done
done <<<"$site_dirs"
cuda_candidates+=(/usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib/wsl/lib)
ld_dirs=("$B/lib")
cuda_report=()
read -ra cuda_libs <<<"$(manifest cuda_libs)"
for soname in "${cuda_libs[@]}"; do
  found=""
  for d in "${cuda_candidates[@]}"; do
    if [ -e "$d/$soname" ]; then found=$d/$soname; break; fi
  done
  if [ -z "$found" ]; then
    found=$(ldconfig -p 2>/dev/null | awk -v n="$soname" '$1 == n {print $NF; exit}')
  fi
  if [ -n "$found" ]; then
    cuda_report+=("$soname $found")
    d=$(dirname "$found")
    case " ${ld_dirs[*]} " in *" $d "*) ;; *) ld_dirs+=("$d") ;; esac
  else
    cuda_report+=("$soname not found")
  fi
done
bundle_ld=$(IFS=:; echo "${ld_dirs[*]}")${orig_ld:+:$orig_ld}
echo "gpu-check: CUDA libraries used:"
printf '  %s\n' "${cuda_report[@]}"
glibc_need=$(manifest glibc_min)
glibc_have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
if [ -n "$glibc_need" ] && [ -n "$glibc_have" ] &&
  [ "$(printf '%s\n%s\n' "$glibc_need" "$glibc_have" | sort -V | head -n 1)" != "$glibc_need" ]; then
  echo "gpu-check: warning: the bundle needs glibc >= $glibc_need, this machine has $glibc_have" >&2
fi
if command -v nvidia-smi >/dev/null 2>&1; then
  gpu_line=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -n 1)
  [ -n "$gpu_line" ] || gpu_line="no GPU (nvidia-smi printed nothing)"
else
  gpu_line="no GPU (nvidia-smi not found)"
fi
echo "gpu-check: $gpu_line"

work=$repo/bench/results/tmp/gpu_check
rm -rf "$work" && mkdir -p "$work/runfiles"
ln -s "$repo" "$work/runfiles/zeroshard"  # TEST_SRCDIR: data files from the checkout
. bazel/mpirun_local.sh

# --- runs -----------------------------------------------------------------------
row_part=() row_status=() row_p=() row_s=() row_f=() row_sec=() row_note=()
add_row() {  # part status passed skipped failed seconds note
  row_part+=("$1") row_status+=("$2") row_p+=("$3") row_s+=("$4") row_f+=("$5") row_sec+=("$6") row_note+=("$7")
  printf 'gpu-check: %-28s %-7s %4s passed %4s skipped %4s failed %6s s  %s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7"
}
start=$SECONDS
budget() {  # prints the seconds a run may take: min($1, what is left), or 0
  local left=$((deadline - (SECONDS - start)))
  [ $left -lt 10 ] && { echo 0; return; }
  [ "$1" -lt $left ] && echo "$1" || echo $left
}
bin_of() {  # label -> absolute file, or "" and the reason on stderr
  awk -F'\t' -v l="$1" '$2 == l {print $3 "\t" $4; exit}' "$B/targets.tsv"
}

# Counts a gtest XML: passed, skipped, failed, the first skip reason and the
# first failure, separated by \x1f (a tab would merge empty fields in read).
xml_counts() {  # count.xml [message xml...]
  python3 - "$@" <<'PY'
import sys, xml.etree.ElementTree as ET
def cases(path):
    try:
        return list(ET.parse(path).getroot().iter("testcase"))
    except (ET.ParseError, OSError):
        return None
def first_line(msg):
    # gtest messages start with "file:line" on a line of their own.
    lines = [l.strip() for l in (msg or "").splitlines() if l.strip()]
    if len(lines) > 1 and ":" in lines[0] and lines[0].rsplit(":", 1)[1].isdigit():
        lines = lines[1:]
    return (lines[0] if lines else "").replace("\x1f", " ").replace("|", "/")[:200]
counted = cases(sys.argv[1])
if counted is None:
    print("-1\x1f0\x1f0\x1f\x1f"); sys.exit()
p = s = f = 0
skip_msg = fail_msg = ""
for c in counted:
    if c.find("failure") is not None or c.find("error") is not None:
        f += 1
        el = c.find("failure") if c.find("failure") is not None else c.find("error")
        fail_msg = fail_msg or f"{c.get('name')}: {first_line(el.get('message') or el.text)}"
    elif c.get("result") == "skipped" or c.find("skipped") is not None or c.get("status") == "notrun":
        s += 1
    else:
        p += 1
for path in sys.argv[1:]:
    for c in cases(path) or []:
        el = c.find("skipped")
        if el is not None and not skip_msg:
            skip_msg = first_line(el.get("message") or el.text)
print("\x1f".join([str(p), str(s), str(f), skip_msg, fail_msg]))
PY
}

# One gtest run: direct (np 0; under "${runner[@]}" when set) or under the
# bundled mpirun (np >= 1, one XML per rank merged by bazel/merge_test_xml.py).
runner=()
run_gtest() {  # row-name np timeout label [gtest args...]
  local name=$1 np=$2 limit=$3 label=$4
  shift 4
  local entry file note
  entry=$(bin_of "$label")
  file=${entry%%$'\t'*} note=${entry#*$'\t'}
  if [ -z "$entry" ]; then
    add_row "$name" FAILED 0 0 0 0 "not in the bundle ($label)"; return
  fi
  if [ "$file" = - ]; then
    add_row "$name" FAILED 0 0 0 0 "$note"; return
  fi
  local t
  t=$(budget "$limit")
  if [ "$t" -eq 0 ]; then
    add_row "$name" FAILED 0 0 0 0 "not run: the check's $deadline s deadline passed"; return
  fi
  local slug=${name//[^A-Za-z0-9_]/_}
  local out=$work/$slug log=$work/$slug.log
  mkdir -p "$out/tmp"
  local t0=$SECONDS rc
  if [ "$np" -eq 0 ]; then
    timeout -k 10 "$t" env LD_LIBRARY_PATH="$bundle_ld" TEST_TMPDIR="$out/tmp" TEST_SRCDIR="$work/runfiles" \
      TEST_WORKSPACE=zeroshard "${runner[@]}" "$B/$file" --gtest_output="xml:$out/test.xml" "$@" >"$log" 2>&1
    rc=$?
    counts=$(xml_counts "$out/test.xml")
  else
    timeout -k 10 "$t" env LD_LIBRARY_PATH="$bundle_ld" TEST_TMPDIR="$out/tmp" TEST_SRCDIR="$work/runfiles" \
      TEST_WORKSPACE=zeroshard ZEROSHARD_TEST_NP="$np" \
      mpirun "${mpirun_flags[@]}" -np "$np" bash -c \
      'exec "$0" --gtest_output="xml:$1/rank_${OMPI_COMM_WORLD_RANK}.xml" "${@:2}"' "$B/$file" "$out" "$@" \
      >"$log" 2>&1
    rc=$?
    python3 bazel/merge_test_xml.py --np "$np" --mpirun_rc "$rc" --out "$out/test.xml" "$out"/rank_*.xml \
      >>"$log" 2>&1
    counts=$(xml_counts "$out/test.xml" "$out"/rank_*.xml)
  fi
  local sec=$((SECONDS - t0))
  local p s f skip_msg fail_msg status msg
  IFS=$'\x1f' read -r p s f skip_msg fail_msg <<<"$counts"
  if [ "$p" = -1 ]; then p=0 s=0 f=1 fail_msg="no test XML (exit status $rc)"; fi
  if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1 fail_msg="exit status $rc"; fi
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && fail_msg="timed out after $t s${fail_msg:+; $fail_msg}"
  local total=$((p + s + f))
  if [ "$f" -gt 0 ]; then
    status=FAILED msg=$fail_msg
  elif [ $total -eq 0 ]; then
    status=FAILED msg="0 tests ran$(printf ' (%s matched nothing)' "$*" | sed 's/ ( matched nothing)//')"
  elif [ "$s" -eq $total ]; then
    status=SKIPPED msg=$skip_msg
  else
    status=PASSED msg=""
    [ "$s" -gt 0 ] && msg="$s skipped: $skip_msg"
  fi
  add_row "$name" "$status" "$p" "$s" "$f" "$sec" "$msg"
  if [ "$status" = FAILED ]; then
    echo "---- last lines of $log" >&2
    tail -n 25 "$log" >&2
    echo "----" >&2
  fi
}

# A benchmark's GPU_BENCH line as "status tokens_per_s mfu reason".
bench_line() {
  local line
  line=$(grep '^GPU_BENCH ' "$1" 2>/dev/null | tail -n 1)
  [ -n "$line" ] || { echo "none"; return; }
  local st tps mfu reason
  st=$(sed -n 's/.* status=\([a-z]*\).*/\1/p' <<<"$line")
  tps=$(sed -n 's/.* tokens_per_s=\([0-9.]*\).*/\1/p' <<<"$line")
  mfu=$(sed -n 's/.* mfu=\([0-9.]*\).*/\1/p' <<<"$line")
  reason=$(sed -n 's/.* reason=//p' <<<"$line")
  echo "$st ${tps:--} ${mfu:--} $reason"
}

part_kernels() {
  local labels
  labels=$(awk -F'\t' '$1 == "kernels" {print $2}' "$B/targets.tsv")
  [ -n "$labels" ] || { add_row kernels FAILED 0 0 0 0 "no kernel tests in the bundle"; return; }
  local label
  for label in $labels; do run_gtest "kernels ${label##*:}" 0 120 "$label"; done
}
part_comm() {
  local l=//tests:comm_conformance_test_bin
  run_gtest "comm nccl np1" 1 90 $l --gtest_filter='*/nccl'
  run_gtest "comm mpi_staged np2" 2 90 $l --gtest_filter='*/mpi_staged'
  run_gtest "comm mpi_staged np4" 4 120 $l --gtest_filter='*/mpi_staged'
}
part_engine() {
  run_gtest "engine np1" 1 150 //tests/gpu:engine_cuda_test_bin
  run_gtest "engine np2" 2 150 //tests/gpu:engine_cuda_test_bin
  run_gtest "host offload np1" 1 150 //tests/gpu:host_offload_cuda_test_bin
  run_gtest "host offload np2" 2 150 //tests/gpu:host_offload_cuda_test_bin
}
part_parity() { run_gtest "parity np1" 1 150 //tests/gpu:gpu_cpu_parity_test_bin; }
# compute-sanitizer (CUDA toolkit) over the tests of the tiled attention,
# the register-row LayerNorm, the one-pass cross-entropy and the sorted
# embedding backward: out-of-bounds and misaligned accesses, shared-memory
# races, barrier misuse. A report fails the run (--error-exitcode).
part_sanitize() {
  local sanitizer
  sanitizer=$(command -v compute-sanitizer || true)
  for dir in "${CUDA_HOME:-}" /usr/local/cuda; do
    [ -z "$sanitizer" ] && [ -n "$dir" ] && [ -x "$dir/bin/compute-sanitizer" ] && sanitizer=$dir/bin/compute-sanitizer
  done
  if [ -z "$sanitizer" ]; then
    add_row sanitize SKIPPED 0 0 0 0 "compute-sanitizer not found (PATH, \$CUDA_HOME/bin, /usr/local/cuda/bin)"; return
  fi
  local tool
  for tool in memcheck racecheck synccheck; do
    runner=("$sanitizer" --tool "$tool" --error-exitcode 1 --print-limit 20)
    run_gtest "sanitize $tool kernels" 0 120 //kernels/cuda:kernels_gpu_test \
      --gtest_filter='*Attention*:*LayerNorm*:*CrossEntropy*:*Embedding*'
    run_gtest "sanitize $tool rows" 0 120 //kernels/cuda:row_kernels_gpu_test
  done
  runner=()
}
part_bench() {
  local -a args
  read -ra args <<<"${ZS_GPU_BENCH_ARGS:-}"
  local t0=$SECONDS entry file t
  entry=$(bin_of //bench/gpu:gpt2_gpu_bench)
  file=${entry%%$'\t'*}
  t=$(budget 150)
  if [ -z "$entry" ] || [ "$file" = - ]; then
    echo "GPU_BENCH impl=zeroshard status=failed reason=not in the bundle" >"$work/bench_ours.log"
  elif [ "$t" -eq 0 ]; then
    echo "GPU_BENCH impl=zeroshard status=failed reason=not run: the deadline passed" >"$work/bench_ours.log"
  else
    timeout -k 10 "$t" env LD_LIBRARY_PATH="$bundle_ld" mpirun "${mpirun_flags[@]}" -np 1 "$B/$file" "${args[@]}" \
      >"$work/bench_ours.log" 2>&1
  fi
  t=$(budget 150)
  if [ "$t" -eq 0 ]; then
    echo "GPU_BENCH impl=pytorch status=failed reason=not run: the deadline passed" >"$work/bench_torch.log"
  else
    # The machine's own environment: the bundle's libstdc++ must not reach PyTorch.
    timeout -k 10 "$t" env LD_LIBRARY_PATH="$orig_ld" python3 bench/gpu/torch_gpt2_step.py "${args[@]}" \
      >"$work/bench_torch.log" 2>&1
  fi
  local p=0 s=0 f=0 notes=() ours_tps="" torch_tps="" impl log st tps mfu reason
  for impl in zeroshard PyTorch; do
    log=$work/bench_ours.log
    [ $impl = PyTorch ] && log=$work/bench_torch.log
    read -r st tps mfu reason <<<"$(bench_line "$log")"
    case "$st" in
      ok)
        p=$((p + 1))
        notes+=("$impl $(printf '%.0f' "$tps") tok/s, MFU $(awk -v m="$mfu" 'BEGIN {printf "%.1f%%", 100 * m}')")
        [ $impl = zeroshard ] && ours_tps=$tps || torch_tps=$tps ;;
      skipped) s=$((s + 1)); notes+=("$impl skipped: $reason") ;;
      failed) f=$((f + 1)); notes+=("$impl failed: $reason") ;;
      *) f=$((f + 1)); notes+=("$impl failed: no GPU_BENCH line (see $log)") ;;
    esac
  done
  [ -n "$ours_tps" ] && [ -n "$torch_tps" ] &&
    notes+=("ours/PyTorch $(awk -v a="$ours_tps" -v b="$torch_tps" 'BEGIN {printf "%.2f", a / b}')")
  local note status
  note=$(printf '%s; ' "${notes[@]}")
  note=${note%; }
  if [ $f -gt 0 ]; then status=FAILED; elif [ $p -eq 0 ]; then status=SKIPPED; else status=PASSED; fi
  add_row bench "$status" $p $s $f $((SECONDS - t0)) "$note"
  if [ $status = FAILED ]; then
    for log in "$work/bench_ours.log" "$work/bench_torch.log"; do
      echo "---- last lines of $log" >&2
      tail -n 15 "$log" >&2
    done
  fi
}

echo "gpu-check: parts: ${only[*]} (deadline $deadline s; logs in $work)"
for part in "${only[@]}"; do "part_$part"; done

# --- summary ----------------------------------------------------------------------
failed=0 skipped=0
for st in "${row_status[@]}"; do
  [ "$st" = FAILED ] && failed=$((failed + 1))
  [ "$st" = SKIPPED ] && skipped=$((skipped + 1))
done
if [ $require_gpu -eq 1 ] && [ $skipped -gt 0 ]; then
  echo "gpu-check: --require-gpu and $skipped runs skipped"
fi
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
table() {  # markdown table of the rows
  echo "| part | status | passed | skipped | failed | seconds | note |"
  echo "|---|---|---|---|---|---|---|"
  local i
  for i in "${!row_part[@]}"; do
    echo "| ${row_part[$i]} | ${row_status[$i]} | ${row_p[$i]} | ${row_s[$i]} | ${row_f[$i]} | ${row_sec[$i]} | ${row_note[$i]//|//} |"
  done
}
echo
printf '%-28s %-7s %6s %7s %6s %7s  %s\n' part status passed skipped failed seconds note
for i in "${!row_part[@]}"; do
  printf '%-28s %-7s %6s %7s %6s %7s  %s\n' "${row_part[$i]}" "${row_status[$i]}" "${row_p[$i]}" "${row_s[$i]}" \
    "${row_f[$i]}" "${row_sec[$i]}" "${row_note[$i]}"
done
mkdir -p "$(dirname "$report")"
{
  echo "# GPU check"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), checkout $commit, bundle of ${bundle_commit:-?} (tools/gpu-check --bundle, parts: ${only[*]})."
  echo
  echo "GPU: $gpu_line"
  echo
  echo "CUDA libraries: $(printf '%s; ' "${cuda_report[@]}" | sed 's/; $//')"
  echo
  table
  echo
  echo "Total $((SECONDS - start)) s. SKIPPED: every case skipped (the note is the first reason)."
} >"$report"
echo
echo "gpu-check: $((SECONDS - start)) s; summary in $report"
rc=0
[ $failed -gt 0 ] && rc=1
[ $require_gpu -eq 1 ] && [ $skipped -gt 0 ] && rc=1
echo "gpu-check: $failed failed, $skipped skipped of ${#row_part[@]} runs"
exit $rc
