#!/usr/bin/env python3
"""The differential runners (issue 29, tools/zero3py/runners/PROTOCOL.md) tested through their
protocol, each runner a long-lived `python -m zero3py.runners --target T`:

  * the torch control (DDP over gloo) agrees with its own unsharded reference on zero3's built-in
    sequential models at world 2 (zero findings), and that reference agrees with `zero3 train
    --backend ref` from the same init weights and data (`zero3 inspect --dump-data`);
  * DeepSpeed ZeRO-3 reproduces issue 29's two seed bugs: (a) a zero-sized parameter crashes
    with the NOT_AVAILABLE assertion at world 2; (b) a frozen parameter read through a reference
    cached before sharding trains silently on a wrong loss, and the same parameter trainable
    crashes ('Cannot reduce scatter gradients ...'); each finding's standalone script, asked of
    the live runner (a write_repro request with the finding's signature, PROTOCOL.md "Repro
    scripts"), is written, verified by the runner (it ran alone and exited 1) and kept, at most 60
    lines, and exits 1 again run here; the scripts of healthy cases (every layer type of the
    sequential kind, gas 2, cross_entropy; raw reads as external parameters and an MoE leaf)
    build the runner's model and exit 0, so the runner answers them unverified and removes them;
    a malformed request is an error and a reference_disagreement gets no script (unsupported);
    the torch runner writes and verifies scripts too (its control case's exits 0: unverified);
  * a copy of DeepSpeed with only its fetch gate patched as PR #8375 proposes (never the installed
    package) no longer fails (a)'s assertion; the zero-sized parameter then reaches the coalesced
    gather and fails there (torch.cat of nothing), the second bug the PR's thread fixes later;
  * FSDP2's HSDP (fully_shard on a 2-D mesh, blocks of 2 of 4 ranks) agrees with the runner's
    unsharded reference on two built-in sequential models, and DeepSpeed answers such a case
    unsupported (0.19.8 removed MiCS);
  * ZeRO's and FSDP2's levers (runner_test_levers.py): case.json's stage, offload, hpZ and
    activation-checkpointing keys are validated; checkpointing recomputes the chosen modules; and
    ZeRO stages 1 and 2, optimizer and parameter offload, hpZ (blocks of 2 of 4 ranks) and
    checkpointing of linears and of attention in a token model agree with the reference under
    all three targets (every lever runs on CPU: none is unsupported);
  * bf16 (runner_test_bf16.py): case.json's dtype is checked; the reference keeps f32 masters;
    feature and token models at W=2 and 4, gas 1 and 2, ZeRO stages 1 to 3 and optimizer offload
    agree with the reference within bf16's tolerance under all three targets; DeepSpeed's bf16
    ZeRO-1 with MoE ranks routing apart reports a gradient norm off by half (a finding, stated);
    a bf16 case gets no repro script (unsupported).

    tools/e2e/runner_test.py build/tools/zero3 [--python VENV_PYTHON]

Without --python it uses the venv of tools/lib/diff_venv.sh (installing it when missing) and
re-executes itself there. Exit 0 when all hold, 1 otherwise; prints cases per second measured.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tools/, above this room
ROOT = os.path.dirname(TOOLS)
# tools/lib/diff_venv.sh's default place: the user's cache, shared by every clone on the machine.
VENV = os.environ.get("ZERO3_DIFF_VENV", os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                                                      "zero3", "diff-venv"))
# zero3's built-in sequential models (core/models/model_zoo.cc), as torch_oracle's settings has them.
EXTRA = {"moe-tiny": {"loss": "mse", "layers": [
             {"type": "linear", "out": 16}, {"type": "gelu"},
             {"type": "residual", "layers": [{"type": "moe", "experts": 4, "hidden": 16}]}, {"type": "linear", "out": 4}]},
         "broadcast-trap": {"loss": "mse", "layers": [
             {"type": "linear", "out": 4}, {"type": "scale", "shape": [4]}, {"type": "linear", "out": 1},
             {"type": "sum_residual", "layers": [{"type": "raw_scale", "param": "layers.1.scale"}]}]},
         "unused-tiny": {"loss": "mse", "layers": [
             {"type": "linear", "out": 16}, {"type": "unused_linear", "out": 16}, {"type": "gelu"},
             {"type": "linear", "out": 4}]}}


def gate_model(frozen):
    """h [B, 1] * g through a reference cached before sharding, g [4, 1] an unused_linear's weight:
    g is read nowhere else, so under ZeRO-3 it is always the [0] placeholder and h * g is [B, 0]."""
    return {"kind": "sequential", "input_width": 8, "loss": "mse", "layers": [
        {"type": "linear", "out": 1}, {"type": "unused_linear", "out": 4, "requires_grad": not frozen},
        {"type": "sum_residual", "layers": [{"type": "raw_scale", "param": "layers.1.weight"}]},
        {"type": "linear", "out": 2}]}


class Runner:
    """One long-lived runner process, spoken to by the protocol."""

    def __init__(self, python, target, env=None):
        self.process = subprocess.Popen([python, "-m", "zero3py.runners", "--target", target], text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd="/",
                                        env=dict(os.environ, **{"PYTHONPATH": TOOLS, **(env or {})}))
        self.hello = json.loads(self.process.stdout.readline())

    def send(self, request):
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def ask(self, case_dir, timeout_s=None):
        return self.send({"id": case_dir, "case": case_dir, **({"timeout_s": timeout_s} if timeout_s else {})})

    def write_repro(self, case_dir, answer, path, signature, verify_timeout_s=None):
        """The runner's standalone script for the finding `answer` (its answer to case_dir), judged
        `signature` by the harness: written, run alone, kept only when it reproduces."""
        ask = {"case": case_dir, "answer": answer, "signature": signature, "path": path}
        if verify_timeout_s:
            ask["verify_timeout_s"] = verify_timeout_s
        return self.send({"id": path, "write_repro": ask})

    def close(self):
        self.process.stdin.close()
        return self.process.wait(timeout=60)


def reexec_in_venv(args):
    if args.python or os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    install = f"source {TOOLS}/lib/diff_venv.sh && zero3_install_diff_venv"
    if subprocess.run(["bash", "-c", install]).returncode != 0:
        sys.exit("runner_test: the runners' venv did not install (tools/lib/diff_venv.sh said why)")
    python = os.path.join(VENV, "bin", "python")
    os.execv(python, [python, __file__, *sys.argv[1:], "--python", python])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("zero3")
    parser.add_argument("--python", help="the venv's python (default: tools/lib/diff_venv.sh's)")
    args = parser.parse_args()
    reexec_in_venv(args)
    args.python = os.path.abspath(args.python)  # the runners run from / (they must not need a cwd)
    sys.path.insert(0, TOOLS)
    from runner_test_bf16 import bf16_errors
    from runner_test_cases import control_cases, fsdp2_hsdp_cases, seed_bug_cases
    from runner_test_levers import lever_errors
    failures = []
    with tempfile.TemporaryDirectory(prefix="zero3-runner-test-") as work:
        failures += control_cases(Runner, args.python, args.zero3, work, EXTRA)
        failures += seed_bug_cases(Runner, args.python, work, gate_model)
        failures += fsdp2_hsdp_cases(Runner, args.python, args.zero3, work)
        runners = {}  # one live runner per target, shared by the lever and bf16 cases (their pools stay warm)

        def runner_for(target):
            if target not in runners:
                runners[target] = Runner(args.python, target)
            return runners[target]
        try:
            failures += lever_errors(runner_for, work)
            failures += bf16_errors(runner_for, work)
        finally:
            for runner in runners.values():
                runner.close()
    for failure in failures:
        print("FAIL", failure)
    print(f"runner test: {'FAILED' if failures else 'passed'}: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
