"""Counts individual test cases from the test.xml files of one Bazel run.

Usage: count_test_results.py [--label WORD] TESTLOGS_DIR SINCE_EPOCH TARGET...
Each target's test.xml must be newer than SINCE_EPOCH; a target without a
fresh file (it failed to build, or never ran) counts as one failed case, so a
stale pass from an earlier run is never counted. Prints the failing cases and
ends with the line 'N passed, N failed, N skipped', preceded by 'WORD: '
with --label (tools/test runs several tiers and sums them).
"""
import os
import sys
import xml.etree.ElementTree as ET


def main():
    args = sys.argv[1:]
    prefix = ""
    if args[:1] == ["--label"]:
        prefix, args = args[1] + ": ", args[2:]
    testlogs, since, targets = args[0], float(args[1]), args[2:]
    passed = failed = skipped = 0
    failures = []
    for target in targets:
        package, _, name = target.lstrip("/").partition(":")
        path = os.path.join(testlogs, package, name, "test.xml")
        if not os.path.exists(path) or os.path.getmtime(path) < since:
            failed += 1
            failures.append(f"{target}: no test result from this run (build failure or not run)")
            continue
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as e:
            failed += 1
            failures.append(f"{target}: unreadable test.xml ({e})")
            continue
        cases = list(root.iter("testcase"))
        if not cases:
            failed += 1
            failures.append(f"{target}: test.xml lists no test case")
            continue
        for case in cases:
            label = f"{target} {case.get('classname', '')}.{case.get('name', '')}"
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
                failures.append(label)
            elif (case.get("result") == "skipped" or case.find("skipped") is not None
                  or case.get("status") == "notrun"):
                skipped += 1
            else:
                passed += 1
    for f in failures:
        print(f"FAILED: {prefix}{f}")
    print(f"{prefix}{passed} passed, {failed} failed, {skipped} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
