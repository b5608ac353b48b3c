#!/usr/bin/env python3
"""`zero3 train --report FILE` writes the report whatever the outcome: a failed run's report holds its
exit code, the failure's class and kind, and the error text, and replaces any report an earlier run
left there (CI reads the file, so a stale "ok" would hide the failure).

    tools/e2e/train_report_test.py build/tools/zero3
"""
import json
import os
import subprocess
import sys
import tempfile

STALE = {"zero3_report": 1, "status": "ok", "stale": True}


def train(zero3, folder, name, arguments):
    """Runs one training with --report into a file that first holds a stale report; returns
    (exit code, stderr, report or None)."""
    report_path = os.path.join(folder, name + ".json")
    with open(report_path, "w") as stale:
        json.dump(STALE, stale)
    result = subprocess.run([zero3, "train", "--steps", "2", "--report", report_path] + arguments,
                            capture_output=True, text=True)
    with open(report_path) as report_file:
        report = json.load(report_file)
    return result.returncode, result.stderr, report


def check_failure(failures, name, code, stderr, report, expected_code, expected_class, expected_kind):
    if code != expected_code:
        failures.append(f"{name}: exit {code}, expected {expected_code}; stderr: {stderr}")
    if report.get("stale"):
        failures.append(f"{name}: the stale report was left in place")
        return
    expected = {"status": "failed", "exit_code": expected_code}
    for key, value in expected.items():
        if report.get(key) != value:
            failures.append(f"{name}: report[{key!r}] is {report.get(key)!r}, expected {value!r}")
    failure = report.get("failure", {})
    if failure.get("class") != expected_class or failure.get("kind") != expected_kind:
        failures.append(f"{name}: failure class/kind {failure.get('class')!r}/{failure.get('kind')!r}, "
                        f"expected {expected_class!r}/{expected_kind!r}")
    message = failure.get("message", "")
    # The report carries the error text that stderr shows after "error: ".
    if not message or message.splitlines()[0] not in stderr:
        failures.append(f"{name}: report message {message[:200]!r} is not the error on stderr: {stderr[:400]!r}")
    if "replay" not in report:
        failures.append(f"{name}: the failed run's report has no replay command")


def main():
    if len(sys.argv) != 2:
        print("usage: train_report_test.py PATH_TO_ZERO3", file=sys.stderr)
        return 1
    zero3 = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        # Persistence 0 shards every parameter, so broadcast-trap's raw handle reads a partitioned one.
        config_path = os.path.join(folder, "shard_everything.json")
        with open(config_path, "w") as config:
            json.dump({"zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}}, config)
        cases = [
            ("bad_input", ["--load-checkpoint", os.path.join(folder, "no_checkpoint")], 1, "bad_input", "bad_input"),
            ("placeholder", ["--backend", "sim", "--ranks", "2", "--model", "broadcast-trap", "--config", config_path],
             2, "correctness", "correctness"),
            ("mismatch", ["--backend", "sim", "--ranks", "4", "--model", "moe-tiny"], 3, "liveness",
             "collective_mismatch"),
            ("allocation", ["--backend", "sim", "--ranks", "2", "--model", "mlp-tiny", "--faults", "alloc=1"], 4,
             "backend", "out_of_memory"),
        ]
        for name, arguments, expected_code, expected_class, expected_kind in cases:
            code, stderr, report = train(zero3, folder, name, arguments)
            check_failure(failures, name, code, stderr, report, expected_code, expected_class, expected_kind)
        code, stderr, report = train(zero3, folder, "ok", ["--backend", "ref", "--model", "mlp-tiny"])
        if code != 0 or report.get("status") != "ok" or report.get("exit_code") != 0 or len(report["losses"]) != 2:
            failures.append(f"ok: exit {code}, report {json.dumps(report)[:300]}; stderr: {stderr}")
    for failure in failures:
        print("FAIL:", failure)
    if not failures:
        print("every outcome wrote its report: exits 0, 1, 2, 3 and 4")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
