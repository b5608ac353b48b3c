#!/usr/bin/env python3
"""The layering check can fail: planted violations (in core/'s layers, between backend_cuda/'s
three libraries, between tools/' rooms, from below into tools/, from zero3's properties into props/target/, and from traces/format/ into traces/replay/) are reported by file and line, allowed includes are not, and the repository passes."""
import pathlib
import subprocess
import sys

TOOLS = pathlib.Path(__file__).resolve().parent.parent  # tools/, above this room
CHECK = [sys.executable, str(TOOLS / "lint" / "check_layers.py")]
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
        'backend_cuda/launch/planted_cuda.cc:3: includes "backend_cuda/cuda/cuda_world.h": backend_cuda/launch/ may include only backend_cuda/launch/',
        'backend_cuda/mpi/planted_cuda.cc:3: includes "backend_cuda/cuda/nccl_communicator.h": backend_cuda/mpi/ may include only backend_cuda/mpi/ and backend_cuda/launch/',
        "backend_cuda/cuda/planted_mpi.cc:3: includes <mpi.h>",
        "backend_cuda/stray.h:1: directly in backend_cuda/",
        'tools/runs/planted_cli.cc:3: includes "tools/cli/fuzz_target_command.h": tools/runs/ may include only tools/runs/',
        "tools/stray.cc:1: directly in tools/",
        'props/planted_tools.cc:3: includes "tools/runs/training_run.h": props/ may not include tools/',
        'props/lifecycle/planted_target.cc:3: includes "props/target/target_case.h": only props/target/ includes',
        'traces/format/planted_replay.cc:3: includes "traces/replay/replay.h": traces/format/ never includes traces/replay/',
    ]
    for line in expected:
        if line not in output:
            failures.append(f"not reported: {line}")
    for allowed in ["allowed.cc", "allowed_rooms.cc", "planted_upward.h:3", "planted_cuda.cc:2", "planted_mpi.cc:2",
                    "planted_cli.cc:2", "planted_tools.cc:2", "planted_target.cc:2", "planted_replay.cc:2"]:
        if allowed in output:
            failures.append(f"reported although allowed: {allowed}")
    if "13 violation(s)" not in output:
        failures.append("expected exactly 13 violations")
    code, real_output = run(TOOLS.parent)
    if code != 0:
        failures.append(f"the repository has violations:\n{real_output}")
    print(output)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
