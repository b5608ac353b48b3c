#!/usr/bin/env python3
"""`zero3 fuzz --target` end to end, on a small budget (issue 29's CI run, never skipped):

  * the torch control (DDP): a seeded campaign ends with exit 0 and no finding;
  * DeepSpeed ZeRO-3: a seeded campaign ends with exit 2; every finding is saved with a case file
    that `--replay` reproduces (exit 2) and, where the runner could write one, a standalone script
    that exits 1; its report names the versions and the cases per second;
  * the saved findings in traces/findings/ (issue 29's seed bugs as the fuzz found and shrank them)
    still reproduce against the pinned DeepSpeed, each with its signature: the NOT_AVAILABLE
    assertion on a zero-sized parameter, and the silent divergence through a cached reference;
  * with DeepSpeed's fetch gate patched as PR #8375 proposes (a copy, through --target-runner),
    the NOT_AVAILABLE finding no longer appears.

    tools/fuzz_target_test.py build/tools/zero3 [--python VENV_PYTHON]
"""
import argparse
import glob
import json
import os
import shlex
import subprocess
import sys
import tempfile

TOOLS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TOOLS)
FINDINGS = os.path.join(ROOT, "traces", "findings")
sys.path.insert(0, TOOLS)
from runner_test import VENV  # noqa: E402  tools/lib/diff_venv.sh's place, as runner_test reads it


def zero3(binary, *args, timeout=1200):
    result = subprocess.run([binary, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    return result.returncode, result.stdout + result.stderr


def campaign(binary, target, work, cases, seed, *extra):
    out = os.path.join(work, target)
    report = os.path.join(work, target + ".json")
    code, output = zero3(binary, "fuzz", "--target", target, "--cases", cases, "--seed", seed, "--out", out,
                         "--report", report, *extra)
    data = json.load(open(report)) if os.path.exists(report) else None
    return code, output, data


def check_control(binary, work):
    code, output, report = campaign(binary, "torch", work, 25, 1)
    print(f"  torch control: exit {code}, {report and report['cases']} cases, "
          f"{report and len(report['findings'])} findings, {report and report['cases_per_second']:.2f} cases/s")
    if code != 0 or not report or report["findings"] or report["cases"] != 25:
        return [f"the torch control: exit {code}, expected 0 with no finding:\n{output[-3000:]}"]
    return []


def check_deepspeed_campaign(binary, python, work):
    code, output, report = campaign(binary, "deepspeed", work, 12, 11, "--shrink-budget", 30)
    if code != 2 or not report or not report["findings"]:
        return [f"deepspeed campaign: exit {code}, expected 2 with findings:\n{output[-3000:]}"]
    print(f"  deepspeed campaign: {report['cases']} cases, {len(report['findings'])} findings, "
          f"{report['cases_per_second']:.2f} cases/s, versions {report['versions']}")
    failures = []
    if report["versions"].get("deepspeed") is None or report["python"] is None:
        failures.append(f"the report lacks the versions or the interpreter: {report}")
    for finding in report["findings"]:
        print(f"    {finding['verdict']:18s} {finding['signature'][:60]:60s} {finding['modules']} modules, "
              f"script {'yes' if finding['repro_script'] else 'no'}")
        code, output = zero3(binary, "fuzz", "--target", "deepspeed", "--replay", finding["case_file"],
                             "--out", os.path.join(work, "replay"))
        if code != 2:
            failures.append(f"{finding['case_file']} does not replay (exit {code}):\n{output[-1500:]}")
        if finding["repro_script"]:
            run = subprocess.run([python, finding["repro_script"]], capture_output=True, text=True, timeout=300,
                                 cwd=work, env=dict(os.environ, DS_ACCELERATOR="cpu", PYTHONPATH=""))
            if run.returncode != 1:
                failures.append(f"{finding['repro_script']} exits {run.returncode}, not 1:\n{run.stdout[-800:]}{run.stderr[-800:]}")
    return failures


def saved_findings():
    """traces/findings/*.json: {"signature": fragment every reproduction shows, "case": case.json}."""
    for path in sorted(glob.glob(os.path.join(FINDINGS, "*.json"))):
        with open(path) as file:
            yield path, json.load(file)


def check_saved_findings(binary, work):
    failures = []
    for path, saved in saved_findings():
        code, output = zero3(binary, "fuzz", "--target", "deepspeed", "--replay", path, "--out",
                             os.path.join(work, "saved"))
        print(f"  {os.path.basename(path)}: exit {code}")
        if code != 2 or saved["signature"] not in output:
            failures.append(f"{path} no longer reproduces (exit {code}, expected 2 and {saved['signature']!r}):\n"
                            f"{output[-2000:]}")
    return failures


def check_patched_gate(binary, python, work):
    # runner_test_cases imports torch: the venv's interpreter makes the copy.
    made = subprocess.run([python, "-c", "import json, sys; sys.path.insert(0, sys.argv[1]); "
                           "from runner_test_cases import PATCHED_ENV, patched_deepspeed; "
                           "print(json.dumps([patched_deepspeed(sys.argv[2], ''), PATCHED_ENV]))", TOOLS, python],
                          capture_output=True, text=True, check=True)
    package, patched_env = json.loads(made.stdout.strip().splitlines()[-1])
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in patched_env.items())
    runner = (f"{env} PYTHONPATH={shlex.quote(package + os.pathsep + TOOLS)} {shlex.quote(python)} "
              f"-m zero3py.runners --target deepspeed")
    finding = os.path.join(FINDINGS, "deepspeed-not-available.json")
    code, output = zero3(binary, "fuzz", "--target", "deepspeed", "--target-runner", runner, "--replay", finding,
                         "--out", os.path.join(work, "patched"))
    print(f"  {os.path.basename(finding)} with PR #8375's gate: exit {code}, "
          f"NOT_AVAILABLE {'still there' if 'NOT_AVAILABLE' in output else 'gone'}")
    if "NOT_AVAILABLE" in output or code == 4:
        return [f"with PR #8375's gate, {finding} still fails the assertion (exit {code}):\n{output[-1500:]}"]
    return []


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("zero3")
    parser.add_argument("--python", help="the differential venv's python (default: tools/lib/diff_venv.sh's)")
    args = parser.parse_args()
    python = args.python or os.path.join(VENV, "bin", "python")
    failures = []
    with tempfile.TemporaryDirectory(prefix="zero3-fuzz-target-") as work:
        failures += check_control(args.zero3, work)
        failures += check_deepspeed_campaign(args.zero3, python, work)
        failures += check_saved_findings(args.zero3, work)
        failures += check_patched_gate(args.zero3, python, work)
    for failure in failures:
        print("FAIL", failure)
    print(f"fuzz --target test: {'FAILED' if failures else 'passed'}: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
