#!/usr/bin/env python3
"""The runners' memory measurement (tools/zero3py/runners/PROTOCOL.md "Memory", memory.py), tested
through the protocol, each runner a long-lived `python -m zero3py.runners --target T`:

  * case.json's `measure_memory` is checked: true, false or absent; anything else is a CaseError
    naming /measure_memory;
  * healthy cases (an MLP at ZeRO stage 3, a small GPT at stage 2; W=2, gas 2, 6 steps) under each
    target (torch, deepspeed, fsdp2): asked without measure_memory the answer has no peak_bytes;
    asked with it, framework.peak_bytes and framework.held_bytes hold one list per rank of one
    positive int per step, each peak at least what the step started and ended holding, the held
    bytes flat to the byte from the second step on (the rule's premise), memory.memory_growth
    (the judging rule's reference) flags nothing, and the losses and gradient norms are bit for bit
    the unmeasured run's (measuring changes no math); the cost of measuring is printed;
  * a leak, injected by the test-only ZERO3_RUNNER_TEST_LEAK=1 in a runner's environment (each rank
    keeps a clone of one gradient per step): under every target memory_growth flags the MLP case,
    the held bytes growing by the same positive count every step.

  * with --zero3 BINARY, the C++ judge end to end: `zero3 fuzz --target torch --target-memory`
    over the same seed finds nothing with the healthy runner and exactly one memory_growth, shrunk
    to a measured case of 4 steps, with the leaking one.

    tools/e2e/runner_test_memory.py [--python VENV_PYTHON] [--zero3 BINARY]

Without --python it uses the venv of tools/lib/diff_venv.sh (installing it when missing) and
re-executes itself there. Exit 0 when all hold, 1 otherwise.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.environ.get("ZERO3_DIFF_VENV", os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                                                      "zero3", "diff-venv"))
TARGETS = ("torch", "deepspeed", "fsdp2")
WORLD, STEPS, GAS = 2, 6, 2
REPEATS = 2  # each healthy case asked this many times measured and unmeasured, for the cost


def reexec_in_venv(args):
    if args.python or os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    install = f"source {TOOLS}/lib/diff_venv.sh && zero3_install_diff_venv"
    if subprocess.run(["bash", "-c", install]).returncode != 0:
        sys.exit("runner_test_memory: the runners' venv did not install (tools/lib/diff_venv.sh said why)")
    python = os.path.join(VENV, "bin", "python")
    os.execv(python, [python, __file__, *sys.argv[1:], "--python", python])


def memory_case(work, name, model, zero, measure):
    """runner_test_levers' seeded case with `measure_memory` set (or left out: None)."""
    from runner_test_levers import lever_case
    from zero3py.runners.case import check_settings
    directory = lever_case(work, name, model, WORLD, zero, None, [], steps=STEPS, gas=GAS, prefix="memory")
    if measure is not None:
        path = os.path.join(directory, "case.json")
        with open(path) as file:
            settings = json.load(file)
        settings["measure_memory"] = measure
        check_settings(settings, path)
        with open(path, "w") as out:
            json.dump(settings, out, indent=1)
    return directory


def case_key_errors():
    from runner_test_levers import MLP
    from zero3py.runners.case import CaseError, check_settings, default_settings
    failures = []
    for value in ("yes", 1, None, [True]):
        settings = {**default_settings(MLP, WORLD), "measure_memory": value}
        try:
            check_settings(settings, "case.json")
            failures.append(f"case.json with measure_memory {value!r}: no CaseError")
        except CaseError as error:
            if "/measure_memory" not in str(error) or "expected true or false" not in str(error):
                failures.append(f"the CaseError for measure_memory {value!r} must name /measure_memory: {error}")
    for value in (True, False):
        try:
            check_settings({**default_settings(MLP, WORLD), "measure_memory": value}, "case.json")
        except CaseError as error:
            failures.append(f"measure_memory {value} is refused: {error}")
    print(f"  case.json's measure_memory: 4 bad values refused, true and false read{' (FAILED)' if failures else ''}")
    return failures


def shape_errors(answer):
    """What is wrong with an ok answer's peak_bytes and held_bytes (PROTOCOL.md "Memory")."""
    framework = answer.get("framework", {})
    peaks, held = framework.get("peak_bytes"), framework.get("held_bytes")
    if not (isinstance(peaks, list) and isinstance(held, list) and len(peaks) == len(held) == WORLD):
        return [f"peak_bytes and held_bytes must be {WORLD} lists: {json.dumps(framework)[:600]}"]
    errors = []
    for rank, (p, h) in enumerate(zip(peaks, held)):
        if not (len(p) == len(h) == STEPS and all(isinstance(x, int) and x > 0 for x in p + h)):
            errors.append(f"rank {rank}: {STEPS} positive ints each expected: peaks {p}, held {h}")
            continue
        for s in range(STEPS):
            if p[s] < h[s] or (s and p[s] < h[s - 1]):
                errors.append(f"rank {rank} step {s}: peak {p[s]} below the bytes held at its start or end: {p}, {h}")
    return errors


def healthy_errors(runner, target, cases):
    """Each case unmeasured and measured: answers, peaks and the cost."""
    from zero3py.runners.memory import SETTLED_STEP, memory_growth
    failures, costs = [], []
    for name, (plain, measured) in cases.items():
        seconds = {False: [], True: []}
        runner.ask(plain)  # untimed: a model's first case in a pool pays for what later ones reuse
        for _ in range(REPEATS):
            answers = {}
            for measure, directory in ((False, plain), (True, measured)):
                answer = answers[measure] = runner.ask(directory)
                seconds[measure].append(answer.get("seconds", 0.0))
                if answer["status"] != "ok":
                    failures.append(f"{target} {name} (measure_memory {measure}): status {answer['status']}: "
                                    f"{json.dumps(answer)[:1500]}")
            if any(a["status"] != "ok" for a in answers.values()):
                break
            plain_answer, answer = answers[False], answers[True]
            if {"peak_bytes", "held_bytes"} & set(plain_answer["framework"]):
                failures.append(f"{target} {name}: an answer without measure_memory carries peak_bytes or held_bytes")
            for key in ("losses", "grad_norms"):
                if plain_answer["framework"][key] != answer["framework"][key]:
                    failures.append(f"{target} {name}: measuring changed the {key}: {plain_answer['framework'][key]} "
                                    f"-> {answer['framework'][key]}")
            errors = shape_errors(answer)
            failures += [f"{target} {name}: {error}" for error in errors]
            if errors:
                continue
            peaks, held = answer["framework"]["peak_bytes"], answer["framework"]["held_bytes"]
            for rank, h in enumerate(held):
                if len(set(h[SETTLED_STEP:])) != 1:
                    failures.append(f"{target} {name} rank {rank}: held bytes not flat from step {SETTLED_STEP}: {h}")
            flagged = memory_growth(peaks, held)
            if flagged:
                failures.append(f"{target} {name}: a healthy case flagged memory_growth on rank {flagged[0]}: "
                                f"peaks {peaks}, held {held}")
        else:
            off, on = statistics.median(seconds[False]), statistics.median(seconds[True])
            costs.append(f"{name} {off:.2f} -> {on:.2f} s")
            print(f"  {target} {name}: peaks {answer['framework']['peak_bytes']}, held "
                  f"{answer['framework']['held_bytes']}", flush=True)
    print(f"  {target}: a case's seconds unmeasured -> measured (median of {REPEATS}): {', '.join(costs)}", flush=True)
    return failures


def leak_errors(runner, target, directory):
    from zero3py.runners.memory import memory_growth
    answer = runner.ask(directory)
    if answer["status"] != "ok":
        return [f"{target} leak: status {answer['status']}: {json.dumps(answer)[:1500]}"]
    errors = shape_errors(answer)
    if errors:
        return [f"{target} leak: {error}" for error in errors]
    peaks, held = answer["framework"]["peak_bytes"], answer["framework"]["held_bytes"]
    flagged = memory_growth(peaks, held)
    print(f"  {target} leaking one gradient clone per step: peaks {peaks}, held {held}: "
          f"{'memory_growth on rank %d, held +%s B per step' % (flagged[0], flagged[1]) if flagged else 'NOT flagged'}",
          flush=True)
    if not flagged:
        return [f"{target}: the injected leak is not flagged: peaks {peaks}, held {held}"]
    if len(set(flagged[1])) != 1:
        return [f"{target}: the injected leak's held bytes must grow by the same count every step: {flagged[1]}"]
    return []


def fuzz_errors(zero3, python, work, leak_env):
    """`zero3 fuzz --target torch --target-memory` with the healthy and with the leaking runner."""
    failures = []
    for leaking in (False, True):
        name = "leaking" if leaking else "healthy"
        runner = (f"env {leak_env}=1 " if leaking else "") + f"env PYTHONPATH={TOOLS} {python} -m zero3py.runners --target torch"
        report = os.path.join(work, f"fuzz-{name}.json")
        result = subprocess.run([zero3, "fuzz", "--target", "torch", "--target-memory", "--cases", "16", "--seed", "5",
                                 "--shrink-budget", "60", "--out", os.path.join(work, f"fuzz-{name}"), "--report", report,
                                 "--target-runner", runner], capture_output=True, text=True, timeout=900)
        found = json.load(open(report))["findings"] if os.path.exists(report) else None
        verdicts = [finding["verdict"] for finding in found or []]
        expected = ["memory_growth"] if leaking else []
        if verdicts != expected or result.returncode != (2 if leaking else 0):
            failures.append(f"fuzz --target-memory with the {name} runner: exit {result.returncode}, findings {verdicts}, "
                            f"expected {expected}:\n{(result.stdout + result.stderr)[-2000:]}")
            continue
        if leaking:
            shrunk = json.load(open(found[0]["case_file"]))
            shrunk = shrunk.get("case", shrunk)
            if not shrunk.get("measure_memory") or shrunk["steps"] != 4:
                failures.append(f"the memory_growth finding shrank to steps {shrunk['steps']}, measure_memory "
                                f"{shrunk.get('measure_memory')}: expected a measured case of 4 steps")
            print(f"fuzz --target torch --target-memory, leaking runner: {found[0]['message']}", flush=True)
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--zero3", help="also judge through `zero3 fuzz --target torch --target-memory`")
    parser.add_argument("--python", help="the venv's python (default: tools/lib/diff_venv.sh's)")
    parser.add_argument("--targets", default=",".join(TARGETS), help="comma-separated (default: all three)")
    args = parser.parse_args()
    reexec_in_venv(args)
    args.python = os.path.abspath(args.python or sys.executable)
    sys.path.insert(0, TOOLS)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from runner_test import Runner
    from runner_test_levers import MLP, TOKENS
    from zero3py.runners.memory import LEAK_ENV
    failures = case_key_errors()
    with tempfile.TemporaryDirectory(prefix="zero3-runner-test-memory-") as work:
        models = {"mlp-stage-3": (MLP, {"stage": 3}), "tokens-stage-2": (TOKENS, {"stage": 2})}
        cases = {name: (memory_case(work, name, model, zero, None),
                        memory_case(work, f"{name}-measured", model, zero, True))
                 for name, (model, zero) in models.items()}
        for target in args.targets.split(","):
            runner = Runner(args.python, target)
            try:
                failures += healthy_errors(runner, target, cases)
            finally:
                runner.close()
            leaking = Runner(args.python, target, env={LEAK_ENV: "1"})
            try:
                failures += leak_errors(leaking, target, cases["mlp-stage-3"][1])
            finally:
                leaking.close()
        if args.zero3:
            failures += fuzz_errors(os.path.abspath(args.zero3), args.python, work, LEAK_ENV)
    for failure in failures:
        print("FAIL", failure)
    print(f"runner memory test: {'FAILED' if failures else 'passed'}: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
