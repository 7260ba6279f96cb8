#!/usr/bin/env bash
# GPT-2 XL shapes on one rank with optimizer state and masters on the NVMe
# tier (examples/configs/gpt2_xl_offload.pbtxt), and the raw bandwidth of the
# same directory, as markdown tables:
#   1. the plan without offload, refused by check-config with the planner's message;
#   2. `--steps` steps with offload: s/step, bytes read and written per step,
#      bandwidth achieved against raw sequential O_DIRECT measured in this run,
#      peak RSS against the plan.
# --ranks N (default 1): ZeRO-3 dp N on this host, B1 x T128 per rank as on
# one rank (data.batch_size N), each rank holding 1/N of the state and
# 1/N of the config's 20 GiB limit; peak RSS and the run's disk bytes per
# rank (getrusage, /usr/bin/time -v).
# Usage: bench/offload/run.sh [--dir DIR] [--steps N] [--ranks N]
# Needs about 19 GB free in DIR (default /var/tmp) and 12 GiB of memory
# (2 ranks: 20 GB and 13 GiB).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=/var/tmp
steps=3
ranks=1
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    *) echo "run.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
. bench/common/build_bench.sh
build_bench //bench/offload:io_bench
io_bench=$bench_bin
build_bench //examples:train_gpt2
train=$bench_bin
build_bench //cli:zeroshard
cli=$bench_bin
config=examples/configs/gpt2_xl_offload.pbtxt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
layout=()
# The config's fixed 20 GiB is one host's budget: N ranks on it get 1/N each.
if [ "$ranks" -gt 1 ]; then
  layout=(--set engine.parallel.dp="$ranks" --set data.batch_size="$ranks" --set engine.memory_limit_mib=$((20480 / ranks)))
fi

echo "## Without offload"
echo
echo '```'
if "$cli" check-config "$config" --world-size "$ranks" "${layout[@]}" --set engine.offload.optimizer_state=DEVICE \
    --set engine.offload.master_weights=DEVICE >"$tmp/refused.txt" 2>&1; then
  echo "check-config accepted the plan without offload (expected a refusal)"
  cat "$tmp/refused.txt"
  echo '```'
  exit 1
fi
grep -m1 "memory plan exceeds the limit" "$tmp/refused.txt" || cat "$tmp/refused.txt"
echo '```'
echo

echo "## Raw bandwidth of $dir (sequential O_DIRECT, 16 MiB blocks)"
echo
"$io_bench" --dir "$dir" --file_mib 2048 --repeats 1 --block_kib 16384 --depths 1,8 --fio=false | tee "$tmp/raw.md"
echo

echo "## With optimizer state and masters on NVMe$([ "$ranks" -gt 1 ] && echo ", ZeRO-3 dp $ranks on this host")"
echo
train_args=(--config "$config" --steps "$steps" "${layout[@]}" --set engine.offload.nvme_dir="$dir"
  --set engine.checkpoint.dir= --set engine.logging.metrics_path="$tmp/metrics.jsonl" --set engine.logging.trace_path=)
if [ "$ranks" -gt 1 ]; then
  . bazel/mpirun_local.sh
  # Each rank under its own /usr/bin/time: peak RSS and disk blocks per rank.
  mpirun "${mpirun_flags[@]}" -np "$ranks" bash -c '/usr/bin/time -v -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' \
    "$tmp/time" "$train" "${train_args[@]}" >"$tmp/train.out" 2>"$tmp/train.err" || {
    cat "$tmp/train.out" "$tmp/train.err" >&2
    exit 1
  }
else
  /usr/bin/time -v -o "$tmp/time.0" "$train" "${train_args[@]}" >"$tmp/train.out" 2>"$tmp/train.err" || {
    cat "$tmp/train.out" "$tmp/train.err" >&2
    exit 1
  }
fi
planned=$("$cli" check-config "$config" --world-size "$ranks" "${layout[@]}" --set engine.offload.nvme_dir="$dir" |
  awk '/resident peak/ {print $3; exit}')
python3 - "$tmp/metrics.jsonl" "$tmp/time" "$planned" "$tmp/raw.md" "$ranks" <<'PY'
import json, re, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
steps = [l for l in lines if "step" in l and "io" in l]
ranks = int(sys.argv[5])
def field(text, name):
    return int(re.search(name + r": (\d+)", text).group(1))
per_rank = []  # (peak RSS bytes, disk bytes read, written) over the whole run
for r in range(ranks):
    t = open(f"{sys.argv[2]}.{r}").read()
    per_rank.append((field(t, "Maximum resident set size \\(kbytes\\)") * 1024,
                     field(t, "File system inputs") * 512, field(t, "File system outputs") * 512))
rss = per_rank[0][0]
# Raw sequential O_DIRECT figures of this run (the last column of each table).
raw = [float(m) for m in re.findall(r"\| 16 MiB \|.*\| ([0-9.]+) \|\n", open(sys.argv[4]).read())]
raw_write, raw_read = (raw + [0, 0])[:2]
who = "" if ranks == 1 else " (rank 0)"
print(f"| step | loss | s/step | read GB{who} | written GB{who} | I/O busy s{who} | raw-bandwidth time for those bytes"
      f"{' x ' + str(ranks) + ' ranks' if ranks > 1 else ''}, s | raw time / step |")
print("|---|---|---|---|---|---|---|---|")
for s in steps:
    io = s["io"]
    sec = s.get("step_ms", 0) / 1000
    # The ranks share the disk; each moves its 1/ranks of the state.
    raw_s = ranks * (io["read_bytes"] / 1e9 / raw_read + io["write_bytes"] / 1e9 / raw_write) if raw_read and raw_write else 0
    print(f"| {s['step']} | {s['loss']:.4f} | {sec:.1f} | {io['read_bytes']/1e9:.2f} | {io['write_bytes']/1e9:.2f} | "
          f"{io['busy_ms']/1000:.1f} | {raw_s:.1f} | {raw_s/sec:.2f} |")
planned = int(sys.argv[3] or 0)
print()
if ranks == 1:
    print(f"peak RSS {rss/2**30:.2f} GiB; planned resident peak (check-config) {planned/2**30:.2f} GiB"
          + (f" (measured/plan {rss/planned:.3f})" if planned else ""))
else:
    print("| rank | peak RSS GiB | planned resident peak GiB | measured/plan | disk read GB, whole run | disk written GB, whole run |")
    print("|---|---|---|---|---|---|")
    for r, (peak, rd, wr) in enumerate(per_rank):
        print(f"| {r} | {peak/2**30:.2f} | {planned/2**30:.2f} | {peak/planned if planned else 0:.3f} | {rd/1e9:.2f} | {wr/1e9:.2f} |")
PY
