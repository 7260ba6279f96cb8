#!/usr/bin/env bash
# End to end: an I/O fault of the NVMe tier in train_gpt2 under mpirun (2
# ranks, ZeRO-3, optimizer state and masters on NVMe), one step after a
# checkpoint. nvme_dir is a small loop-mounted ext4; once the step-2
# checkpoint is saved (it goes elsewhere) the filesystem is shut down
# (EXT4_IOC_SHUTDOWN: every later read and write of its files fails with
# EIO, as a failing disk's would). Rank 0 spends 3 s more at the start of
# each step (--testing_slow_rank): step 3's I/O comes after the shutdown.
# Every rank must exit 1 within the watchdog's time (not by it),
# print the agreed error naming the I/O, its file and EIO, and leave step_2
# verifying (zeroshard ckpt verify) and no later checkpoint. Needs root,
# mkfs.ext4 and a loop device; skips visibly elsewhere.
set -u
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/sh_test_cases.sh"
bin=$1 config=$2 corpus=$3 zeroshard=$4
tmp=${TEST_TMPDIR:-$(mktemp -d)}
source "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-zeroshard}/bazel/mpirun_local.sh"
watchdog_s=20

# The mount lives under /tmp, not the test's directory: one left behind by
# a crash must not sit inside the build tree.
work=$(mktemp -d /tmp/zs_offload_fault_XXXXXX)
mnt=$work/mnt
cleanup() {
  umount -l "$mnt" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
mkfs=$(command -v mkfs.ext4 || echo /usr/sbin/mkfs.ext4)
if [ "$(id -u)" != 0 ]; then
  skip_case io_fault_after_checkpoint "needs root to loop-mount an ext4"
  finish_cases
fi
if ! { mkdir "$mnt" && truncate -s 64M "$work/image" && "$mkfs" -q -F "$work/image" &&
  mount -o loop -t ext4 "$work/image" "$mnt"; } >"$work/setup.log" 2>&1; then
  skip_case io_fault_after_checkpoint "cannot loop-mount an ext4 here: $(cat "$work/setup.log")"
  finish_cases
fi

log=$tmp/fault.log
# Each rank reports its own exit status; mpirun lets the other rank end by
# itself rather than killing it when the first one exits non-zero.
timeout 120 mpirun "${mpirun_flags[@]}" --mca orte_abort_on_non_zero_status 0 -np 2 bash -c \
  '"$@"; rc=$?; echo "rank $OMPI_COMM_WORLD_RANK exited $rc"; exit $rc' rank \
  "$bin" --config "$config" --steps 4 --testing_slow_rank 0:3000 \
  --set "data.train_path=$corpus" --set "data.val_path=$corpus" --set engine.logging.interval=1 \
  --set engine.offload.optimizer_state=NVME --set engine.offload.master_weights=NVME \
  --set "engine.offload.nvme_dir=$mnt" --set engine.offload.buffer_count=2 \
  --set engine.offload.buffer_bytes=12288 --set engine.offload.queue_depth=4 \
  --set "engine.checkpoint.dir=$tmp/ck" --set engine.checkpoint.interval=2 \
  --set "engine.comm.timeout_s=$watchdog_s" >"$log" 2>&1 &
job=$!
saved=0
for _ in $(seq 1 1200); do
  if grep -q "^zeroshard: saved .*/ck/step_2$" "$log"; then
    saved=1
    break
  fi
  kill -0 "$job" 2>/dev/null || break
  sleep 0.05
done
shutdown_ms=$(date +%s%3N)
# EXT4_IOC_SHUTDOWN = _IOR('X', 125, __u32), EXT4_GOING_FLAGS_NOLOGFLUSH = 2.
python3 -c 'import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.ioctl(fd, 0x8004587D, struct.pack("I", 2))' "$mnt" >"$work/shutdown.log" 2>&1
shut=$?
wait "$job"
rc=$?
elapsed_ms=$(($(date +%s%3N) - shutdown_ms))
echo "--- mpirun exited with $rc, ${elapsed_ms} ms after the shutdown; output:"
cat "$log"
echo "---"

record_case checkpoint_saved_then_filesystem_shut_down $((saved == 1 && shut == 0)) \
  "saved=$saved shutdown rc=$shut $(cat "$work/shutdown.log")"
record_case job_ends_within_the_watchdogs_time $((rc != 124 && elapsed_ms < watchdog_s * 1000)) \
  "mpirun rc=$rc after ${elapsed_ms} ms"
# 1: the trainer's own error exit, not the watchdog's 70.
ranks_failed=$(grep -cE "^rank [01] exited 1$" "$log")
record_case each_rank_exits_1_by_itself $((ranks_failed == 2)) "$(grep -E '^rank [0-9] exited' "$log")"
grep -Eq "^train_gpt2: the optimizer step's NVMe offload I/O failed on dp rank [01]: offload I/O \([A-Z_]+ chunk [0-9]+\): offload file rank [01] (optimizer_state|master_weights) \(.*\): (read|write) of [0-9]+ bytes at offset [0-9]+: Input/output error$" "$log"
st=$?
record_case error_names_the_io_its_file_and_eio $((st == 0)) "$(grep '^train_gpt2:' "$log")"
grep -q "step     2/4" "$log" && ! grep -q "step     3/4" "$log"
st=$?
record_case step_3_never_finishes $((st == 0)) "$(grep 'step  ' "$log")"
expect step_2_checkpoint_verifies 0 "" -- "$zeroshard" ckpt verify "$tmp/ck/step_2"
later=$(find "$tmp/ck" -maxdepth 1 -name 'step_*' ! -name step_2 | wc -l)
record_case no_later_checkpoint $((later == 0)) "$(ls "$tmp/ck")"
finish_cases
