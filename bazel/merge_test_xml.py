"""Merges per-rank gtest XML files into one, failing a case that failed anywhere.

Usage: merge_test_xml.py --np N --mpirun_rc RC --out FILE rank_0.xml ...
A rank whose file is missing, or a non-zero mpirun exit with no recorded
failure, becomes a failing test case of its own so nothing passes silently.
"""
import argparse
import sys
import xml.etree.ElementTree as ET


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--np", type=int, required=True)
    ap.add_argument("--mpirun_rc", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()

    cases = {}  # (suite, name) -> dict(status, messages)
    order = []
    seen_ranks = set()
    for path in args.files:
        # An unmatched shell glob arrives as the literal "rank_*.xml".
        try:
            rank = int(path.rsplit("rank_", 1)[1].split(".")[0])
        except (IndexError, ValueError):
            continue
        try:
            root = ET.parse(path).getroot()
        except (ET.ParseError, OSError) as e:
            print(f"merge_test_xml: unreadable {path}: {e}", file=sys.stderr)
            continue
        seen_ranks.add(rank)
        for case in root.iter("testcase"):
            key = (case.get("classname", ""), case.get("name", ""))
            if key not in cases:
                cases[key] = {"failed": False, "skipped": False, "skip_message": "", "messages": [],
                              "time": case.get("time", "0")}
                order.append(key)
            entry = cases[key]
            for failure in case.findall("failure"):
                entry["failed"] = True
                entry["messages"].append(f"rank {rank}: {failure.get('message', '')}")
            if case.get("result") == "skipped" or case.find("skipped") is not None:
                entry["skipped"] = True
                skip = case.find("skipped")
                if not entry["skip_message"] and skip is not None:
                    entry["skip_message"] = (skip.get("message") or skip.text or "").strip()

    extra = []
    missing = sorted(set(range(args.np)) - seen_ranks)
    if missing:
        extra.append(("mpirun", "ranks_wrote_results", f"ranks {missing} wrote no test results"))
    any_failed = any(c["failed"] for c in cases.values())
    if args.mpirun_rc != 0 and not any_failed:
        extra.append(("mpirun", "exit_status", f"mpirun exited with status {args.mpirun_rc}"))

    suites = ET.Element("testsuites")
    suite = ET.SubElement(suites, "testsuite", name=f"mpi_np{args.np}")
    failures = 0
    skipped = 0
    for key in order:
        c = cases[key]
        el = ET.SubElement(suite, "testcase", classname=key[0], name=key[1], time=c["time"])
        if c["failed"]:
            failures += 1
            f = ET.SubElement(el, "failure", message="; ".join(c["messages"])[:4000])
            f.text = "\n".join(c["messages"])
        elif c["skipped"]:
            skipped += 1
            el.set("result", "skipped")
            # The reason, as the first rank that skipped gave it.
            ET.SubElement(el, "skipped", message=c["skip_message"][:4000])
    for classname, name, message in extra:
        failures += 1
        el = ET.SubElement(suite, "testcase", classname=classname, name=name, time="0")
        ET.SubElement(el, "failure", message=message).text = message
    suite.set("tests", str(len(order) + len(extra)))
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    ET.ElementTree(suites).write(args.out, encoding="utf-8", xml_declaration=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
