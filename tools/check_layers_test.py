#!/usr/bin/env python3
"""The layering check can fail: planted violations are reported by file and line, allowed includes
are not, and the real core/ passes."""
import pathlib
import subprocess
import sys

TOOLS = pathlib.Path(__file__).resolve().parent
CHECK = [sys.executable, str(TOOLS / "check_layers.py")]
FIXTURE = TOOLS / "testdata" / "layering_violation"


def run(root):
    result = subprocess.run(CHECK + [str(root)], capture_output=True, text=True)
    return result.returncode, result.stdout + result.stderr


def main():
    failures = []
    code, output = run(FIXTURE)
    if code != 1:
        failures.append(f"planted violations: exit {code}, expected 1")
    expected = [
        'core/tensor/planted_upward.h:4: includes "core/zero3/zero3_engine.h": core/tensor/ may include only base, tensor',
        'core/base/planted_sim.cc:2: includes "sim/sim_world.h"',
        "core/nn/planted_cuda.cc:3: includes <cuda_runtime.h>",
        "core/stray.h:1: directly in core/",
    ]
    for line in expected:
        if line not in output:
            failures.append(f"not reported: {line}")
    for allowed in ["allowed.cc", "planted_upward.h:3", "planted_cuda.cc:2"]:
        if allowed in output:
            failures.append(f"reported although allowed: {allowed}")
    if "4 violation(s)" not in output:
        failures.append("expected exactly 4 violations")
    code, real_output = run(TOOLS.parent)
    if code != 0:
        failures.append(f"the repository's core/ has violations:\n{real_output}")
    print(output)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
