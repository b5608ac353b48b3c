#!/usr/bin/env python3
"""`zero3 bench step --against torch` end to end, briefly: both sides timed for gpt-tiny and
mlp-tiny at one thread, the printed ratio equal to the printed times' quotient, the report holding
the same rows; a model the torch side does not mirror, and --threads without --against, are usage
errors (exit 1)."""
import json
import os
import re
import subprocess
import sys
import tempfile

zero3 = sys.argv[1]
failures = []


def run(*args):
    return subprocess.run([zero3, "bench", "step", *args], capture_output=True, text=True, timeout=240)


with tempfile.TemporaryDirectory() as work:
    report_path = os.path.join(work, "bench.json")
    for model in ("gpt-tiny", "mlp-tiny"):
        result = run("--against", "torch", "--model", model, "--threads", "1", "--rounds", "1", "--steps", "5",
                     "--report", report_path)
        if result.returncode != 0:
            failures.append(f"{model}: exit {result.returncode}\n{result.stderr}")
            continue
        line = re.search(rf"{model} +threads 1: zero3 +([0-9.]+) ms/step +torch +([0-9.]+) ms/step +zero3/torch "
                         r"([0-9.]+)", result.stdout)
        if not line:
            failures.append(f"{model}: no result line in\n{result.stdout}")
            continue
        ours, theirs, ratio = map(float, line.groups())
        rows = json.load(open(report_path))["rows"]
        if len(rows) != 1 or rows[0]["model"] != model or rows[0]["threads"] != 1:
            failures.append(f"{model}: report rows {rows}")
            continue
        row = rows[0]
        # The report holds the unrounded figures: its ratio is its times' quotient, and the printed
        # line is the report rounded (4 significant digits for times, 3 decimals for the ratio).
        if not (row["zero3_ms"] > 0 and row["torch_ms"] > 0 and
                abs(row["ratio_zero3_over_torch"] - row["zero3_ms"] / row["torch_ms"]) <= 1e-9 * row["ratio_zero3_over_torch"]):
            failures.append(f"{model}: report times {row['zero3_ms']}, {row['torch_ms']} and ratio "
                            f"{row['ratio_zero3_over_torch']} disagree")
        for printed, key in ((ours, "zero3_ms"), (theirs, "torch_ms")):
            if abs(printed - row[key]) > 5e-4 * row[key]:
                failures.append(f"{model}: printed {printed} ms but the report says {row[key]}")
        if abs(ratio - row["ratio_zero3_over_torch"]) > 0.0005 + 1e-12:
            failures.append(f"{model}: printed ratio {ratio} but the report says {row['ratio_zero3_over_torch']}")
    bad = run("--against", "torch", "--model", "gpt2-124m", "--threads", "1")
    if bad.returncode != 1 or "unknown model" not in bad.stderr:
        failures.append(f"an unmirrored model: exit {bad.returncode}, expected 1\n{bad.stderr}")
    stray = run("--threads", "2")
    if stray.returncode != 1 or "--against torch only" not in stray.stderr:
        failures.append(f"--threads without --against: exit {stray.returncode}, expected 1\n{stray.stderr}")

for failure in failures:
    print("FAIL " + failure)
print(f"bench_against_torch_test: {len(failures)} failures")
sys.exit(1 if failures else 0)
