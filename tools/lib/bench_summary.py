#!/usr/bin/env python3
"""The "Summary" section of bench/results/latest.md: one headline ratio per row.

Each value is computed from one benchmark's own table in this run (a ratio
measured in one run); previous values come from the same extraction over the
previous results (latest.json, else latest.md). A row whose table or row is
absent reads "not measured", never a guess.

  bench_summary.py --section NAME=FILE ... [--previous PATH]
"""
import argparse
import json
import os
import re
import sys

# The benchmarks tools/bench runs, as its section names.
SECTIONS = ["zero", "comm", "single_rank", "pipeline", "tp", "activation_checkpointing", "offload", "offload_dp2",
            "offload_io", "simulator", "memory_by_stage", "overlap"]

NOT_MEASURED = "not measured"


def tables(text):
    """Markdown tables of `text` as (heading, header cells, rows of cells); heading: the last '#' line above."""
    out, heading, lines, i = [], "", text.splitlines(), 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        if line.startswith("|") and i + 1 < len(lines) and re.match(r"^\|\s*:?-{3,}", lines[i + 1].strip()):
            header = cells(line)
            rows, i = [], i + 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(cells(lines[i].strip()))
                i += 1
            out.append((heading, header, rows))
            continue
        i += 1
    return out


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def number(cell):
    """The leading number of a cell ("1.50", "163.5 ms", "1.000000"), or None."""
    m = re.match(r"^\s*([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)", cell or "")
    return float(m.group(1)) if m else None


def column(header, *names):
    for name in names:
        if name in header:
            return header.index(name)
    return None


def step_gemm(sec):
    for _, _, rows in tables(sec.get("single_rank", "")):
        for r in rows:
            if r[0].startswith("step time / GEMM time (median") and len(r) > 1:
                return number(r[1])
    return None


def zero_step_table(sec):
    for heading, header, rows in tables(sec.get("zero", "")):
        if heading.startswith("Step time") and "dp = 2" in heading and "stage" in header:
            return header, rows
    return None, None


def stage3_vs_stage0(sec):
    header, rows = zero_step_table(sec)
    if header is None:
        return None
    c = column(header, "vs stage 0")
    for r in rows:
        if c is not None and r[0] == "3":
            return number(r[c])
    return None


def dp2_vs_one_rank(sec):
    # The zero bench's dp-2 step table, when it has a column against one rank's step.
    header, rows = zero_step_table(sec)
    if header is None:
        return None
    c = next((i for i, h in enumerate(header) if "one rank" in h), None)
    for r in rows:
        if c is not None and r[0] == "0":
            return number(r[c])
    return None


def pipeline_rows(sec, m="8"):
    """schedule -> (header, row) of the pp = 2 bubble table at m micro-batches."""
    for heading, header, rows in tables(sec.get("pipeline", "")):
        if "pp = 2" in heading and "schedule" in header and "m" in header and "step ms" in header:
            mi = header.index("m")
            return header, {r[0]: r for r in rows if len(r) > mi and r[mi] == m}
    return None, {}


def pipeline_ratio(sec, num, den, col):
    header, rows = pipeline_rows(sec)
    if header is None or num not in rows or den not in rows or col not in header:
        return None
    c = header.index(col)
    a, b = number(rows[num][c]), number(rows[den][c])
    return a / b if a is not None and b else None


def worst(values):
    """The value farthest from 1."""
    values = [v for v in values if v is not None]
    return max(values, key=lambda v: abs(v - 1)) if values else None


def simulated_vs_measured_step(sec):
    # The simulator benchmark's tables (ZeRO 0-3 at dp 2 and the pp 2, m 8
    # schedules, each predicted from a cost profile) when it ran: the worst
    # "predicted / measured".
    ratios = []
    for _, header, rows in tables(sec.get("simulator", "")):
        c = column(header, "predicted / measured")
        if c is not None:
            ratios += [number(r[c]) for r in rows if c < len(r)]
    if ratios:
        return worst(ratios)
    # Else the pp = 2 bubble table's simulated step beside the measured one, at
    # m = 8 (the target's case, as for the schedule rows): its "simulated /
    # measured" column right after "simulated ms", else simulated ms / the
    # measured step ms.
    header, rows = pipeline_rows(sec)
    if header is None or "simulated ms" not in header:
        return None
    sim = header.index("simulated ms")
    ratio = sim + 1 if sim + 1 < len(header) and header[sim + 1] == "simulated / measured" else None
    measured = sim - 1 if sim > 0 and header[sim - 1].startswith("step before the optimizer") else None
    ratios = []
    for r in rows.values():
        if ratio is not None and ratio < len(r):
            ratios.append(number(r[ratio]))
        elif measured is not None and sim < len(r) and number(r[measured]):
            v = number(r[sim])
            ratios.append(v / number(r[measured]) if v is not None else None)
    return worst(ratios)


def selective_ac(sec, after):
    for _, header, rows in tables(sec.get("activation_checkpointing", "")):
        if not header or header[0] != "policy" or after not in header:
            continue
        c = header.index(after) + 1
        if c >= len(header) or header[c] != "vs none":
            continue
        for r in rows:
            if r[0].startswith("selective") and c < len(r):
                return number(r[c])
    return None


def model_state_vs_formula(sec):
    ratios = []
    for name in ("zero", "tp"):
        for heading, header, rows in tables(sec.get(name, "")):
            if not heading.startswith("Model-state"):
                continue
            for i, h in enumerate(header):
                if h.startswith("measured / theory") or h.startswith("measured / formula"):
                    ratios += [number(r[i]) for r in rows if i < len(r)]
    return worst(ratios)


# (name, value from the sections, format, target)
ROWS = [
    ("step/GEMM", step_gemm, "{:.2f}", "<= 1.15"),
    ("dp 2 stage 0 / one rank step", dp2_vs_one_rank, "{:.2f}", "<= 1.10"),
    ("stage 3 / stage 0 step", stage3_vs_stage0, "{:.3f}", "<= 1.05"),
    ("ZB-H1 bubble / 1F1B", lambda s: pipeline_ratio(s, "ZERO_BUBBLE_H1", "ONE_F_ONE_B", "measured bubble"),
     "{:.2f}", "<= 0.5"),
    ("ZB-H1 step / 1F1B", lambda s: pipeline_ratio(s, "ZERO_BUBBLE_H1", "ONE_F_ONE_B", "step ms"), "{:.2f}",
     "<= 0.97"),
    ("interleaved step / 1F1B", lambda s: pipeline_ratio(s, "INTERLEAVED_1F1B", "ONE_F_ONE_B", "step ms"), "{:.2f}",
     "<= 1.00"),
    ("simulated / measured step", simulated_vs_measured_step, "{:.2f}", "0.90 to 1.10"),
    ("selective AC activation memory / none", lambda s: selective_ac(s, "peak activation bytes"), "{:.3f}",
     "<= 0.60"),
    ("selective AC step / none", lambda s: selective_ac(s, "step time"), "{:.3f}", "<= 1.05"),
    ("model-state bytes / formula", model_state_vs_formula, "{:.6f}", "1.000000"),
]


def values(sec):
    out = {}
    for name, fn, fmt, _ in ROWS:
        try:
            v = fn(sec)
        except (ValueError, IndexError, ZeroDivisionError):
            v = None
        out[name] = fmt.format(v) if v is not None else None
    return out


def split_latest_md(text):
    """Sections of a latest.md written by tools/bench: '## NAME' lines with NAME a known section."""
    sec, name, buf = {}, None, []
    for line in text.splitlines():
        m = re.match(r"^## (\S+)\s*$", line)
        if m and m.group(1) in SECTIONS + ["Summary"]:
            if name:
                sec[name] = "\n".join(buf)
            name, buf = m.group(1), []
            continue
        buf.append(line)
    if name:
        sec[name] = "\n".join(buf)
    return sec


def previous_sections(path):
    """Sections of the previous results: latest.json beside `path` when present, else the .md itself."""
    if not path:
        return {}
    json_path = os.path.splitext(path)[0] + ".json"
    if os.path.exists(json_path):
        try:
            return {s["name"]: s["markdown"] for s in json.load(open(json_path))["sections"]}
        except (ValueError, KeyError, TypeError):
            pass
    if os.path.exists(path):
        return split_latest_md(open(path).read())
    return {}


def meets(value, target):
    """"yes" or "no" for a formatted value against "<= X", "A to B" or an exact "X"; "-" when not measured."""
    if value is None:
        return "-"
    v = float(value)
    m = re.match(r"^<=\s*(\S+)$", target)
    if m:
        return "yes" if v <= float(m.group(1)) else "no"
    m = re.match(r"^(\S+) to (\S+)$", target)
    if m:
        return "yes" if float(m.group(1)) <= v <= float(m.group(2)) else "no"
    return "yes" if value == target else "no"


def summary(current, previous):
    now, before = values(current), values(previous)
    lines = ["| row | value | previous | target | met |", "|---|---|---|---|---|"]
    for name, _, _, target in ROWS:
        lines.append(f"| {name} | {now[name] or NOT_MEASURED} | {before[name] or 'n/a'} | {target} | "
                     f"{meets(now[name], target)} |")
    return "\n".join(lines) + "\n"


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--section", action="append", default=[], help="NAME=FILE: this run's section")
    p.add_argument("--previous", help="the previous latest.md (its latest.json beside it is read first)")
    args = p.parse_args(argv)
    current = {}
    for s in args.section:
        name, _, path = s.partition("=")
        current[name] = open(path).read()
    sys.stdout.write(summary(current, previous_sections(args.previous)))


if __name__ == "__main__":
    main(sys.argv[1:])
