#!/usr/bin/env python3
"""Seeded fault injector for `zeroshard run` soaks (docs/resilience_supervisor.md).

Two commands:

  fault_injector.py exec PID_DIR PROGRAM ARGS...
      The rank wrapper: writes PID_DIR/rank.R (R from OMPI_COMM_WORLD_RANK)
      and becomes PROGRAM, keeping its pid.

  fault_injector.py inject --seed S --log SUPERVISOR_LOG --ckpt DIR --pids PID_DIR
      --np N --steps T --interval I --watch-pid PID --report OUT.json [--metrics M.jsonl]
      [--kills K] [--corrupts C] [--stops 0|1] [--fills 0|1 --fill-dir D] [--terms 0|1]

The seed decides the order of the faults, the step each waits for and the
rank it hits. Faults fire one at a time: each once the current attempt's
progress lines (those after the supervisor's last restart line) reach its
step and every rank has written its pid; the next waits for the restart line
that the fault causes. The step comes from the metrics file when given (rank
0 flushes it every step), else from the log's progress lines, which reach
the log a moment later (on a loaded machine, over a second). The kinds:

  kill     SIGKILL a rank.
  corrupt  once `latest` moves (a save committed), flip a byte in a tensor
           of that checkpoint, then SIGKILL a rank (one of the K kills):
           the restart must pass over it.
  stop     SIGSTOP a rank once: the other ranks' watchdog must abort the job
           (the trainer needs a short engine.comm.timeout_s). The stopped
           process must not outlive its attempt.
  fill     once `latest` moves (a save committed), fill the checkpoint
           filesystem with FILL_DIR/fill so the next save fails; the file
           is removed as soon as a rank of the failed attempt has exited.
  term     SIGTERM a rank: the job saves, exits 75 and is restarted.

The report (JSON) lists the plan and what fired: kind, rank, pid, the step
the progress lines showed, the corrupted step, and any problem seen (a
restart nobody caused, a fault that found no attempt to hit).

  fault_injector.py check --report OUT.json --log SUPERVISOR_LOG --ckpt DIR --interval I

checks the supervisor's log against the report: one restart line per fault,
in order, whose cause names it (the killed rank's signal 9, the watchdog's
abort naming the stopped rank, the failed save's "No space left on device",
exit 75 for the SIGTERM); steps lost (the restart's step less the step it
resumes from) at most interval + 1, and 2 * interval + 1 where a corrupt
newest checkpoint costs one interval more; the fallback warning naming the
corrupted step. Prints one line per fault; exits 1 on any mismatch.
"""
import argparse
import errno
import json
import os
import random
import re
import signal
import sys
import time

PROGRESS = re.compile(r"^step\s+(\d+)/(\d+)")
RESTART = re.compile(r"^zeroshard run: restart (\d+)/")
SAVED = re.compile(r"^zeroshard: saved .*/step_(\d+)$")
NOT_SAVED = re.compile(r"; step (\d+) was not saved$")


class FollowedFile:
    """The complete lines appended to a file since the last call; a file
    rewritten shorter is read again from its start."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.partial = ""

    def new_lines(self):
        try:
            with open(self.path, "r", errors="replace") as f:
                if os.fstat(f.fileno()).st_size < self.offset:
                    self.offset, self.partial = 0, ""  # rewritten
                f.seek(self.offset)
                text = f.read()
                self.offset = f.tell()
        except FileNotFoundError:
            return []
        lines = (self.partial + text).split("\n")
        self.partial = lines.pop()
        return lines


class SupervisorLog:
    """Follows the supervisor's log: restarts and failed saves so far, and
    the current attempt's last progress step and saves."""

    def __init__(self, path):
        self.file = FollowedFile(path)
        self.restarts = 0
        self.step = -1
        self.saves = 0
        self.failed_saves = 0

    def poll(self):
        for line in self.file.new_lines():
            if RESTART.match(line):
                self.restarts += 1
                self.step, self.saves = -1, 0
            elif m := PROGRESS.match(line):
                self.step = int(m.group(1))
            elif SAVED.match(line):
                self.saves += 1
            elif NOT_SAVED.search(line):
                self.failed_saves += 1


class MetricsFile:
    """Follows the trainer's metrics file (engine.logging.metrics_path, one
    JSON line per step, flushed by rank 0): the step without the delay of
    the output's way through mpirun and the supervisor."""

    def __init__(self, path):
        self.file = FollowedFile(path)
        self.step = -1

    def poll(self):
        for line in self.file.new_lines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("step"), int):
                self.step = record["step"]

    def new_attempt(self):
        """Every line the ended attempt wrote is in the file by the time its
        restart line is seen: read past them."""
        self.poll()
        self.step = -1


def alive(pid):
    """True while pid runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


class Injector:
    def __init__(self, args):
        self.a = args
        self.log = SupervisorLog(args.log)
        self.metrics = MetricsFile(args.metrics) if args.metrics else None
        self.seen_restarts = 0
        self.report = {"seed": args.seed, "plan": [], "fired": [], "problems": []}
        self.expected_restarts = 0
        self.t0 = time.monotonic()

    def running(self):
        return alive(self.a.watch_pid)

    def wait(self, condition, timeout_s):
        """Polls the log until condition() holds; False on timeout or when the
        supervisor has exited."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.log.poll()
            if self.metrics is not None:
                if self.log.restarts > self.seen_restarts:
                    self.metrics.new_attempt()
                self.metrics.poll()
            self.seen_restarts = self.log.restarts
            if self.log.restarts > self.expected_restarts:
                self.report["problems"].append(
                    f"restart {self.log.restarts} with no fault of ours (at step {self.step()})")
                self.expected_restarts = self.log.restarts
            if condition():
                return True
            if not self.running():
                self.log.poll()
                return condition()
            time.sleep(0.01)
        return False

    def step(self):
        """The current attempt's last step (-1 before its first)."""
        return self.metrics.step if self.metrics is not None else self.log.step

    def latest(self):
        try:
            with open(os.path.join(self.a.ckpt, "latest")) as f:
                return f.read().strip()
        except FileNotFoundError:
            return ""

    def pids(self):
        out = {}
        for r in range(self.a.np):
            try:
                with open(os.path.join(self.a.pids, f"rank.{r}")) as f:
                    out[r] = int(f.read().strip())
            except (FileNotFoundError, ValueError):
                return None
        return out if all(alive(p) for p in out.values()) else None

    def clear_pids(self):
        for r in range(self.a.np):
            try:
                os.unlink(os.path.join(self.a.pids, f"rank.{r}"))
            except FileNotFoundError:
                pass

    def corrupt_newest(self, rng):
        with open(os.path.join(self.a.ckpt, "latest")) as f:
            name = f.read().strip()
        step = int(name[len("step_"):])
        shard = os.path.join(self.a.ckpt, name, f"shard_pp000_dp{rng.randrange(self.a.np):05d}_tp000.safetensors")
        with open(shard, "r+b") as f:
            # 8 bytes before the end: inside the last tensor's data, which its
            # checksum covers.
            f.seek(os.path.getsize(shard) - 8)
            b = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([b[0] ^ 0xFF]))
        return step

    def fill(self):
        path = os.path.join(self.a.fill_dir, "fill")
        chunk = b"\0" * (1 << 20)
        with open(path, "wb", buffering=0) as f:
            try:
                while True:
                    f.write(chunk)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
        # What a partial chunk left: a few bytes more.
        with open(path, "ab", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
        return path

    def plan(self):
        a = self.a
        if a.corrupts > a.kills:
            sys.exit("fault_injector: --corrupts rides on --kills: at most as many")
        kinds = (["kill"] * (a.kills - a.corrupts) + ["corrupt"] * a.corrupts + ["stop"] * a.stops +
                 ["fill"] * a.fills + ["term"] * a.terms)
        rng = random.Random(a.seed)
        rng.shuffle(kinds)
        # Two checkpoints before the first fault (a corrupt newest one has an
        # older one to fall back to); room after each to recover.
        lo, hi = 2 * a.interval + 2, a.steps - 2 * a.interval - 2
        slot = (hi - lo) // max(1, len(kinds))
        if slot < 2 * a.interval + 2:
            sys.exit(f"fault_injector: {a.steps} steps hold no {len(kinds)} faults {2 * a.interval + 2} steps apart")
        for i, kind in enumerate(kinds):
            self.report["plan"].append(
                {"kind": kind, "step": lo + i * slot + rng.randrange(slot // 2), "rank": rng.randrange(a.np)})
        return rng

    def run(self):
        rng = self.plan()
        for fault in self.report["plan"]:
            target, rank, kind = fault["step"], fault["rank"], fault["kind"]
            got = {}

            def ready():
                p = self.pids() if self.step() >= target else None
                if p:
                    got.update(p)
                return bool(p)

            if not self.wait(ready, 300):
                self.report["problems"].append(f"{kind} at step {target}: no attempt reached it")
                break
            fired = {"kind": kind, "rank": rank, "pid": got[rank], "step": self.step(), "log_step": self.log.step,
                     "t": round(time.monotonic() - self.t0, 2)}
            pid = got[rank]
            self.expected_restarts += 1  # the restart this fault causes
            want = self.expected_restarts
            if kind == "fill":
                # Right after a commit: the next save is the one to fail.
                latest = self.latest()
                if not self.wait(lambda: self.latest() != latest, 120):
                    self.report["problems"].append("fill: no save came")
                    break
                fired["filled_at_step"] = self.step()
                failed_before = self.log.failed_saves
                fill_path = self.fill()
                # The save fails and every rank exits: the file goes as soon as
                # one has (the log says so later), before any restart saves.
                if not self.wait(lambda: not all(alive(p) for p in got.values()), 120):
                    self.report["problems"].append("fill: the attempt did not end")
                os.unlink(fill_path)
            elif kind == "corrupt":
                # Right after a commit, so that no save in flight commits a
                # newer step after the kill (rank 0 may finish one alone).
                latest = self.latest()
                if not self.wait(lambda: self.latest() != latest, 120):
                    self.report["problems"].append("corrupt: no save came")
                    break
                fired["corrupted_step"] = self.corrupt_newest(rng)
                os.kill(pid, signal.SIGKILL)
            else:
                os.kill(pid, {"kill": signal.SIGKILL, "stop": signal.SIGSTOP, "term": signal.SIGTERM}[kind])
            self.clear_pids()
            restarted = self.wait(lambda: self.log.restarts >= want, 120)
            fired["restarted"] = restarted
            if kind == "fill":
                fired["failed_save"] = self.log.failed_saves > failed_before
            if kind == "stop":
                # The supervisor ends every process of a failed attempt.
                time.sleep(0.5)
                fired["outlived_attempt"] = alive(pid)
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
            self.report["fired"].append(fired)
            if not restarted:
                self.report["problems"].append(f"{kind} at step {fired['step']}: no restart followed")
                break
        # Restarts after the last fault are ours to report too.
        self.wait(lambda: False, 1e9)
        with open(self.a.report, "w") as f:
            json.dump(self.report, f, indent=1)


RESTART_LINE = re.compile(r"^zeroshard run: restart (\d+)/(\d+) after (.*) at step (\d+|unknown); "
                          r"resuming from step (\d+) with dp (\d+)$")


def expected_cause(fault):
    """A regular expression the restart's cause must match."""
    r = fault["rank"]
    return {
        "kill": rf"rank {r} signal 9 \(Killed\)",
        "corrupt": rf"rank {r} signal 9 \(Killed\)",
        "stop": rf"rank \d+ watchdog abort: collective #\d+ .* did not finish within \S+; .*\b{r}\b.*",
        "fill": r"rank \d+ exit code 1 \(.*No space left on device; step \d+ was not saved\)",
        "term": r"(rank \d+ )?exit code 75 \(preempted\)",
    }[fault["kind"]]


def check(args):
    with open(args.report) as f:
        report = json.load(f)
    log = open(args.log, errors="replace").read().split("\n")
    restarts = [RESTART_LINE.match(l) for l in log if l.startswith("zeroshard run: restart ")]
    problems = list(report["problems"])
    if None in restarts:
        problems.append("a restart line of another form")
    restarts = [m for m in restarts if m]
    fired = report["fired"]
    if len(fired) != len(report["plan"]):
        problems.append(f"{len(fired)} of {len(report['plan'])} faults fired")
    if len(restarts) != len(fired):
        problems.append(f"{len(restarts)} restart lines for {len(fired)} faults")
    print("| fault | rank | step | restart cause | resumed from | steps lost | bound |")
    print("|---|---|---|---|---|---|---|")
    for fault, m in zip(fired, restarts):
        kind = fault["kind"]
        cause, at, resumed = m.group(3), m.group(4), int(m.group(5))
        bound = (2 if kind == "corrupt" else 1) * args.interval + 1
        lost = int(at) - resumed if at != "unknown" else None
        print(f"| {kind} | {fault['rank']} | {fault['step']} | {cause} | {resumed} | {lost} | {bound} |")
        if not re.fullmatch(expected_cause(fault), cause):
            problems.append(f"{kind}: cause '{cause}' does not match '{expected_cause(fault)}'")
        if lost is None or not 0 <= lost <= bound:
            problems.append(f"{kind}: {lost} steps lost, expected 0..{bound}")
        if kind == "stop" and fault.get("outlived_attempt"):
            problems.append("stop: the stopped rank outlived its attempt")
        if kind == "fill" and not fault.get("failed_save"):
            problems.append("fill: no save failed")
        if kind == "corrupt":
            s = fault["corrupted_step"]
            warning = f"zeroshard run: warning: checkpoint {args.ckpt}/step_{s} fails verification: "
            if not any(l.startswith(warning) for l in log):
                problems.append(f"corrupt: no warning passing over step_{s}")
            if resumed >= s:
                problems.append(f"corrupt: resumed from step {resumed}, not below the corrupted step {s}")
    for p in problems:
        print(f"problem: {p}")
    return 1 if problems else 0


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "exec":
        pid_dir, argv = sys.argv[2], sys.argv[3:]
        rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("SLURM_PROCID", "0"))
        tmp = os.path.join(pid_dir, f"rank.{rank}.tmp")
        with open(tmp, "w") as f:
            f.write(f"{os.getpid()}\n")
        os.rename(tmp, os.path.join(pid_dir, f"rank.{rank}"))
        os.execvp(argv[0], argv)
    if len(sys.argv) >= 2 and sys.argv[1] == "check":
        p = argparse.ArgumentParser(prog="fault_injector.py check")
        p.add_argument("command")
        p.add_argument("--report", required=True)
        p.add_argument("--log", required=True)
        p.add_argument("--ckpt", required=True)
        p.add_argument("--interval", type=int, required=True)
        sys.exit(check(p.parse_args()))
    p = argparse.ArgumentParser(prog="fault_injector.py inject")
    p.add_argument("command", choices=["inject"])
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--ckpt", required=True)
    p.add_argument("--pids", required=True)
    p.add_argument("--np", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--interval", type=int, required=True)
    p.add_argument("--watch-pid", type=int, required=True)
    p.add_argument("--report", required=True)
    p.add_argument("--metrics", default="", help="the trainer's engine.logging.metrics_path, off the checkpoint "
                   "filesystem; without it the step comes from the supervisor's log")
    p.add_argument("--kills", type=int, default=0)
    p.add_argument("--corrupts", type=int, default=0)
    p.add_argument("--stops", type=int, default=0)
    p.add_argument("--fills", type=int, default=0)
    p.add_argument("--fill-dir", default="")
    p.add_argument("--terms", type=int, default=0)
    args = p.parse_args()
    if args.fills and not args.fill_dir:
        sys.exit("fault_injector: --fills needs --fill-dir on the checkpoint filesystem")
    Injector(args).run()


if __name__ == "__main__":
    main()
