#!/usr/bin/env python3
"""`zero3 fuzz --target` end to end, on a small budget (issue 29's CI run, never skipped):

  * the torch control (DDP): a seeded campaign ends with exit 0 and no finding;
  * DeepSpeed ZeRO-3: a seeded campaign ends with exit 2; every finding was confirmed by a second
    run alone and is saved with a case file that `--replay` reproduces (exit 2, and its --report
    gives the same signature), an ISSUE.md, its upstream status from traces/findings/upstream.json
    (never "not looked up"), and either a standalone script that was verified alone and exits 1
    again here, in at most 60 lines, or the reason it has none; its report names the versions, the
    cases per second and the flaky cases;
  * the saved findings in traces/findings/ (issue 29's seed bugs as the fuzz found and shrank them)
    still reproduce against the pinned DeepSpeed, each with its verdict signature and a row of the
    upstream table: the NOT_AVAILABLE assertion on a zero-sized parameter, the empty cat, the
    KeyError in _get_norm_groups, and the silent divergence through a cached reference;
  * with DeepSpeed's fetch gate patched as PR #8375 proposes (a copy, through --target-runner),
    the NOT_AVAILABLE finding no longer appears.

    tools/e2e/fuzz_target_test.py build/tools/zero3 [--python VENV_PYTHON]
"""
import argparse
import glob
import json
import os
import shlex
import subprocess
import sys
import tempfile

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tools/, above this room
HERE = os.path.join(TOOLS, "e2e")  # runner_test and runner_test_cases, beside this script
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
    if report["versions"].get("deepspeed") is None or report["python"] is None or "flaky" not in report:
        failures.append(f"the report lacks the versions, the interpreter or the flaky cases: {report}")
    for finding in report["findings"]:
        repro = finding["repro"]
        print(f"    {finding['verdict']:18s} {finding['signature'][:60]:60s} {finding['modules']} modules, "
              f"script {'verified, %s lines' % repro['lines'] if repro['verified'] else 'none: ' + repro['why'][:80]}, "
              f"upstream {finding['upstream']['status']}")
        replay_report = os.path.join(work, "replay.json")
        code, output = zero3(binary, "fuzz", "--target", "deepspeed", "--replay", finding["case_file"],
                             "--out", os.path.join(work, "replay"), "--report", replay_report)
        replayed = json.load(open(replay_report)) if os.path.exists(replay_report) else {}
        if code != 2 or replayed.get("signature") != finding["signature"]:
            failures.append(f"{finding['case_file']} does not replay (exit {code}, signature "
                            f"{replayed.get('signature')!r}):\n{output[-1500:]}")
        if finding["upstream"]["status"] not in ("known", "unknown"):
            failures.append(f"{finding['signature']}: no row of traces/findings/upstream.json matches it")
        issue = open(finding["issue"]).read() if os.path.exists(finding["issue"]) else ""
        if not all(part in issue for part in ("- **Versions:**", "- **Upstream:**", "## Observed", "## Reproduce")):
            failures.append(f"{finding['issue']} is missing or lacks its parts:\n{issue[:800]}")
        if repro["verified"]:
            script = finding["repro_script"]
            lines = len(open(script).read().splitlines())
            run_line = next(line for line in open(script) if line.startswith("Run: "))
            command = run_line[len("Run: "):].split("  #")[0].strip()
            run = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=300,
                                 cwd=os.path.dirname(script))
            if run.returncode != 1 or "reproduced:" not in run.stdout or lines > 60:
                failures.append(f"{script} ({lines} lines) run as its Run: line says exits {run.returncode}, "
                                f"not 1:\n{run.stdout[-800:]}{run.stderr[-800:]}")
        elif not repro["why"]:
            failures.append(f"{finding['signature']}: no script and no reason")
    return failures


def saved_findings():
    """traces/findings/*.json: {"signature": fragment every reproduction shows, "case": case.json}."""
    for path in sorted(glob.glob(os.path.join(FINDINGS, "*.json"))):
        with open(path) as file:
            yield path, json.load(file)


def check_saved_findings(binary, work):
    failures = []
    for path, saved in saved_findings():
        if "case" not in saved:
            continue  # upstream.json
        report = os.path.join(work, "saved.json")
        code, output = zero3(binary, "fuzz", "--target", saved["target"], "--replay", path, "--out",
                             os.path.join(work, "saved"), "--report", report)
        replayed = json.load(open(report)) if os.path.exists(report) else {}
        print(f"  {os.path.basename(path)}: exit {code}, {replayed.get('signature')}, upstream "
              f"{(replayed.get('upstream') or {}).get('status')}")
        if code != 2 or replayed.get("signature") != saved["verdict_signature"]:
            failures.append(f"{path} no longer reproduces (exit {code}, expected 2 and {saved['verdict_signature']!r}):\n"
                            f"{output[-2000:]}")
        elif (replayed.get("upstream") or {}).get("status") not in ("known", "unknown"):
            failures.append(f"{path}: no row of traces/findings/upstream.json matches it")
    return failures


def check_patched_gate(binary, python, work):
    # runner_test_cases imports torch: the venv's interpreter makes the copy.
    made = subprocess.run([python, "-c", "import json, sys; sys.path[:0] = [sys.argv[1], sys.argv[3]]; "
                           "from runner_test_cases import PATCHED_ENV, patched_deepspeed; "
                           "print(json.dumps([patched_deepspeed(sys.argv[2], ''), PATCHED_ENV]))", HERE, python, TOOLS],
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
