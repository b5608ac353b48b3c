#!/usr/bin/env python3
"""`zero3 bench step` end to end: a short run exits 0 and its --report holds the three engines'
step times and both ratios (consistent with the times), and --steps 1, which leaves no step to time
after the warm-up, is a usage error (exit 1) that writes no report.

    tools/bench/bench_step_test.py build/tools/zero3
"""
import json
import math
import os
import subprocess
import sys
import tempfile

TIMES = ["ddp_exact_s_per_step", "ddp_bucketed_s_per_step", "zero3_s_per_step"]
RATIOS = {"ratio_zero3_over_ddp_exact": "ddp_exact_s_per_step",
          "ratio_zero3_over_ddp_bucketed": "ddp_bucketed_s_per_step"}


def bench(zero3, report_path, steps):
    command = [zero3, "bench", "step", "--model", "gpt-tiny", "--ranks", "2", "--steps", str(steps), "--rounds", "1",
               "--report", report_path]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def is_positive_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def check_report(failures, report):
    for key in TIMES + list(RATIOS):
        if not is_positive_number(report.get(key)):
            failures.append(f"report[{key!r}] is {report.get(key)!r}, expected a positive number")
    if failures:
        return
    for ratio, baseline in RATIOS.items():
        expected = report["zero3_s_per_step"] / report[baseline]
        if not math.isclose(report[ratio], expected, rel_tol=1e-9):
            failures.append(f"{ratio} is {report[ratio]}, but zero3 / {baseline} is {expected}")
    if report.get("target_judged_on") != "ratio_zero3_over_ddp_bucketed":
        failures.append(f"the target is judged on {report.get('target_judged_on')!r}, expected the bucketed ratio")


def main():
    if len(sys.argv) != 2:
        print("usage: bench_step_test.py PATH_TO_ZERO3", file=sys.stderr)
        return 1
    zero3 = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        report_path = os.path.join(folder, "bench.json")
        result = bench(zero3, report_path, 3)
        if result.returncode != 0:
            failures.append(f"--steps 3: exit {result.returncode}; stderr: {result.stderr}")
        elif "ratio_zero3_over_ddp_bucketed" not in result.stdout:
            failures.append(f"--steps 3: stdout has no bucketed ratio: {result.stdout}")
        else:
            with open(report_path) as report_file:
                check_report(failures, json.load(report_file))

        rejected_path = os.path.join(folder, "rejected.json")
        result = bench(zero3, rejected_path, 1)
        if result.returncode != 1:
            failures.append(f"--steps 1: exit {result.returncode}, expected 1 (usage); stderr: {result.stderr}")
        if "--steps" not in result.stderr:
            failures.append(f"--steps 1: the error does not name the flag: {result.stderr}")
        if os.path.exists(rejected_path):
            failures.append("--steps 1: a report was written for a rejected run")
    for failure in failures:
        print("FAIL:", failure)
    if not failures:
        print("bench step reports three step times and both ratios; --steps 1 is a usage error")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
