#!/usr/bin/env python3
"""The outside oracle's reach: every math bug of core/base/math_bugs.h, planted in zero3's side only
(`zero3 fuzz --target torch --target-transformer --math-bug NAME`), is caught as a
reference_disagreement on two seeds, although zero3's own properties cannot see it (engine and DDP
reference share the wrong math). The campaigns draw the widened model space (token models,
attention): the mask, attention-backward and embedding bugs need it.

  * an unknown --math-bug is exit 1 naming every known one (the list this test then walks);
  * for each bug and seed: a torch campaign of at most CASES cases, ending at its first finding
    (--max-findings 1, no shrinking), exits 2 with one reference_disagreement, its report naming
    the bug; the row printed is the props/README.md table's;
  * without a bug, the same campaigns (every case the bug campaigns ran, and more) all agree: no
    catch above was a disagreement that was there before the bug.

    tools/e2e/fuzz_target_math_bugs_test.py build/tools/zero3 [--cases 100] [--seeds 1,2]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time


def fuzz(binary, work, name, *args):
    report = os.path.join(work, name + ".json")
    start = time.monotonic()
    result = subprocess.run([binary, "fuzz", "--target", "torch", "--target-transformer", "--shrink-budget", "0", "--out",
                             os.path.join(work, name), "--report", report, *map(str, args)],
                            capture_output=True, text=True, timeout=900)
    data = json.load(open(report)) if os.path.exists(report) else None
    return result.returncode, result.stdout + result.stderr, data, time.monotonic() - start


def known_math_bugs(binary):
    result = subprocess.run([binary, "fuzz", "--target", "torch", "--math-bug", "no-such-bug"],
                            capture_output=True, text=True, timeout=60)
    listed = re.search(r"unknown math bug 'no-such-bug' \(known: ([^)]*)\)", result.stderr)
    if result.returncode != 1 or not listed:
        raise SystemExit(f"FAIL an unknown --math-bug: exit {result.returncode}, expected 1 listing the known "
                         f"ones:\n{result.stdout}{result.stderr}")
    return [name.strip() for name in listed.group(1).split(",")]


def check_caught(binary, work, bug, seed, cases):
    """A failure message, or None when the bug was caught."""
    code, output, report, seconds = fuzz(binary, work, f"{bug}-{seed}", "--cases", cases, "--seed", seed,
                                         "--math-bug", bug, "--max-findings", 1)
    findings = report["findings"] if report else []
    verdicts = [finding["verdict"] for finding in findings]
    if code != 2 or verdicts != ["reference_disagreement"] or report.get("math_bug") != bug:
        return (f"{bug} seed {seed}: exit {code}, findings {verdicts}, report's math_bug "
                      f"{report and report.get('math_bug')!r}; expected exit 2 and one reference_disagreement "
                      f"within {cases} cases:\n{output[-2500:]}")
    finding = findings[0]
    print(f"| {bug} | {seed} | yes | {finding['first_case']} | {finding['signature']} | {seconds:.1f} s |", flush=True)
    return None


def check_clean(binary, work, seed, cases):
    """The same campaign without a bug: the same cases (RapidCheck's sizes ramp over --cases, so the
    budget must be the same too), every one of them agreeing."""
    code, output, report, seconds = fuzz(binary, work, f"clean-{seed}", "--cases", cases, "--seed", seed)
    clean = code == 0 and report is not None and not report["findings"] and report["cases"] == cases
    print(f"| (none) | {seed} | no: {cases} cases agree | - | - | {seconds:.1f} s |" if clean else
          f"| (none) | {seed} | FAILED | - | - | {seconds:.1f} s |", flush=True)
    if not clean:
        return [f"seed {seed} without a math bug: exit {code}, expected 0 and no finding in {cases} cases:\n"
                f"{output[-2500:]}"]
    return []


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("zero3")
    parser.add_argument("--cases", type=int, default=100, help="most cases a campaign may take to catch its bug")
    parser.add_argument("--seeds", default="1,2")
    args = parser.parse_args()
    seeds = [int(seed) for seed in args.seeds.split(",")]
    bugs = known_math_bugs(args.zero3)
    failures = []
    start = time.monotonic()
    print("| math bug | seed | caught | first failing case | verdict | time |\n|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="zero3-math-bugs-") as work:
        for bug in bugs:
            for seed in seeds:
                failure = check_caught(args.zero3, work, bug, seed, args.cases)
                if failure:
                    failures.append(failure)
        for seed in seeds:
            failures += check_clean(args.zero3, work, seed, args.cases)
    for failure in failures:
        print("FAIL", failure)
    print(f"math bugs test: {'FAILED' if failures else 'passed'}: {len(bugs)} bugs x {len(seeds)} seeds, "
          f"{len(failures)} failures, {time.monotonic() - start:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
