#!/usr/bin/env python3
"""Summarises CTest runs for scripts/test.sh: passed / failed / skipped counts over the JUnit
files that `ctest --output-junit` wrote, every skipped test with its reason (the "SKIPPED:
<case>: <reason>" line DS_SKIP prints, tests/support/skip.h), and every failed one. Exits 1 when a
test failed or when a test skipped that is labelled none of gpu, optional, cpu_isa (only a missing
GPU, a Python package Debian 12 does not ship, such as transformers, network namespaces a container
may forbid, or a CPU without the instruction set a kernel is written for (AVX-512, AVX512-BF16,
AMX) may skip a test in CI); 0 otherwise.

    scripts/test_report.py BUILD_DIR JUNIT.xml [JUNIT.xml ...]
"""
import json
import subprocess
import sys
import xml.etree.ElementTree as ET

ALLOWED_SKIP_LABELS = ("gpu", "optional", "cpu_isa")


def labels_by_test(build_dir):
    out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build_dir, check=True,
                         capture_output=True, text=True).stdout
    labels = {}
    for test in json.loads(out)["tests"]:
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        labels[test["name"]] = props.get("LABELS", [])
    return labels


def skip_reason(case):
    # CTest's name is "<binary>: <case>"; the line is "SKIPPED: <case>: <reason>".
    prefix = "SKIPPED: " + case.get("name").split(": ", 1)[-1] + ": "
    out = case.findtext("system-out") or ""
    reasons = [line[len(prefix):] if line.startswith(prefix) else line[len("SKIPPED: "):]
               for line in out.splitlines() if line.startswith("SKIPPED: ")]
    if reasons:
        return "; ".join(reasons)
    node = case.find("skipped")
    message = node.get("message", "") if node is not None else ""
    return f"no reason printed ({message or 'not run'})"


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    labels = labels_by_test(argv[1])
    passed, failed, skipped = [], [], []
    for path in argv[2:]:
        for case in ET.parse(path).getroot().iter("testcase"):
            name, status = case.get("name"), case.get("status")
            if status == "run":
                passed.append(name)
            elif status == "notrun" and case.find("skipped") is not None:
                skipped.append((name, skip_reason(case)))
            else:
                failed.append(name)
    bad_skips = [(n, r) for n, r in skipped
                 if not any(label in labels.get(n, []) for label in ALLOWED_SKIP_LABELS)]
    print(f"test_report: {len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped "
          f"({len(skipped) - len(bad_skips)} of them [gpu], [optional] or [cpu_isa]) of "
          f"{len(passed) + len(failed) + len(skipped)}")
    for name, reason in skipped:
        print(f"  skipped: {name} [{','.join(labels.get(name, []))}]: {reason}")
    for name in failed:
        print(f"  FAILED: {name}")
    if bad_skips:
        print(f"test_report: {len(bad_skips)} test(s) skipped that are not [gpu], [optional] or [cpu_isa]: install or start "
              "what they need (scripts/install_deps.sh, docs/test_cluster.md)")
    return 1 if failed or bad_skips else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
