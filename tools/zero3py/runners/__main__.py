"""A differential runner (PROTOCOL.md beside this file): a long-lived process that prints a hello
line, then answers one JSON line per request read from stdin: a case to train, or a finding's
standalone repro script to write.

    PYTHONPATH=tools ~/.cache/zero3/diff-venv/bin/python -m zero3py.runners --target deepspeed

Exit 0 at the end of stdin, 4 when the runner cannot run at all (a missing DeepSpeed, a bad
command line); the answer to a case is never an exit status.
"""
import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time

TARGETS = ("torch", "deepspeed", "fsdp2")
INSTALL_HINT = "source tools/lib/diff_venv.sh && zero3_install_diff_venv (then run with $ZERO3_DIFF_VENV/bin/python)"


def strict_json(value):
    """JSON has no NaN or infinity: a non-finite number goes out as the string "nan", "inf" or
    "-inf" (PROTOCOL.md), so that a framework's NaN loss is a finding, not a broken line."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {key: strict_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(item) for item in value]
    return value


# The protocol's channel: the process's stdout until main() moves it to a descriptor of its own.
protocol_out = sys.stdout


def say(message):
    protocol_out.write(json.dumps(strict_json(message), allow_nan=False) + "\n")
    protocol_out.flush()


def keep_stdout_for_answers():
    """Moves the protocol to a duplicate of stdout and points descriptor 1 at stderr: whatever else
    writes to stdout (a framework's print in the reference run, the fork server and the ranks it
    forks, which inherit descriptor 1) lands in the log instead of corrupting the answers."""
    global protocol_out
    protocol_out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)


def versions(target):
    """The hello's versions; a target whose framework does not import is exit 4 with how to install it."""
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    found = {"python": platform.python_version()}
    try:
        import torch
        found["torch"] = torch.__version__
        if target == "deepspeed":
            import deepspeed
            found["deepspeed"] = deepspeed.__version__
    except ImportError as error:
        say({"protocol": 1, "status": "error", "target": target,
             "message": f"{error}: the {target} runner needs torch and DeepSpeed: {INSTALL_HINT}"})
        sys.exit(4)
    return found


def versions_line(found):
    """The hello's versions as a repro script names them: "torch 2.15.0+cu132, deepspeed 0.19.8, python 3.11.2"."""
    order = ["torch", "deepspeed"] + [k for k in found if k not in ("torch", "deepspeed")]
    return ", ".join(f"{k} {found[k]}" for k in order if k in found)


def is_repro_request(request):
    """A write_repro request as PROTOCOL.md's "Repro scripts" has it: case, answer, path, the
    harness's verdict signature, optional verify_timeout_s."""
    ask = request.get("write_repro")
    timeout = ask.get("verify_timeout_s", 300) if isinstance(ask, dict) else None
    return (isinstance(ask, dict) and isinstance(ask.get("case"), str) and isinstance(ask.get("answer"), dict)
            and isinstance(ask.get("path"), str) and isinstance(ask.get("signature"), str)
            and isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0)


def answer_repro(target, request, found):
    """A write_repro request -> its answer: the script written and run alone as its Run: line says,
    kept only when it reproduces the finding; or why there is none (PROTOCOL.md, "Repro scripts")."""
    from zero3py.runners.repro import reproduce
    from zero3py.runners.training import Unsupported
    ask, answer = request["write_repro"], {"id": request.get("id")}
    try:  # seed-drawn weights and data first, then, if that does not reproduce, the case's own as literals
        check = reproduce(os.path.abspath(ask["case"]), ask["answer"], os.path.abspath(ask["path"]),
                          versions_line(found), target, ask["signature"], sys.executable,
                          ask.get("verify_timeout_s", 300))
    except Unsupported as error:
        return {**answer, "status": "unsupported", "message": str(error)}
    except (OSError, ValueError, KeyError, TypeError, IndexError) as error:  # the case or answer is not one
        return {**answer, "status": "error", "message": f"write_repro: {type(error).__name__}: {error}"}
    verification = {k: check[k] for k in ("why", "exit_code", "output_tail", "seconds")}
    if not check["verified"]:
        return {**answer, "status": "unverified", "message": check["why"], "verification": verification}
    return {**answer, "status": "ok", "repro_script": check["path"], "lines": check["lines"],
            "expect": check["expect"], "verification": verification}


def rank_summary(answers):
    """The answer's ranks: every rank's state and, for a failed one, what it said and printed."""
    keep = ("rank", "state", "exception_type", "message", "where", "signal", "exit_code", "idle_s", "waits_in",
            "stack", "last_output")
    return [{k: a[k] for k in keep if k in a} for a in answers]


def answer_case(pools, target, request, log_dir):
    """One request -> one answer (PROTOCOL.md, "Answers")."""
    import torch

    from zero3py.runners.case import CaseError, read_case
    from zero3py.runners.pool import RankPool, RunnerError
    from zero3py.runners.training import Unsupported, reference_run
    directory = os.path.abspath(request["case"])
    answer = {"id": request.get("id"), "case": directory, "target": target}
    try:
        case = read_case(directory)
    except CaseError as error:
        return {**answer, "status": "error", "message": str(error)}
    timeout = float(request.get("timeout_s", case.timeout_s))
    if request.get("fresh") and case.world in pools:  # a confirming run: ranks that ran nothing before
        pools.pop(case.world).close()
    pool = pools.get(case.world)
    if pool is None or not pool.alive:
        # A pool per world size stays up: the fuzz draws W per case, and idle ranks only wait on
        # stdin, while starting W interpreters costs seconds.
        pools.pop(case.world, None)
        try:
            pool = pools[case.world] = RankPool(target, case.world, log_dir)
        except RunnerError as error:
            return {**answer, "status": "error", "message": str(error)}
    # The case's clock starts here, with its ranks up and warm (RankPool waits for their warm-up case).
    started = time.monotonic()
    framework_weights = os.path.join(directory, f"{target}.final.safetensors")
    pool.submit(directory, framework_weights)
    try:  # in this process while the ranks train: one process, the global batch
        reference = reference_run(case, os.path.join(directory, "reference.final.safetensors"))
        if case.world > 1:
            reference["order_probe"] = reference_run(case, os.path.join(directory, "reference.probe.safetensors"),
                                                     rank_order=True)
        reference["float64"] = reference_run(case, os.path.join(directory, "reference.float64.safetensors"),
                                             dtype=torch.float64)
    except Unsupported as error:
        reference = {"unsupported": str(error)}
    except Exception as error:  # the reference is judged against zero3's: its failure is an answer too
        reference = {"error": f"{type(error).__module__}.{type(error).__qualname__}: {error}"}
    ranks = pool.collect(started + timeout)
    states = {a["state"] for a in ranks}
    answer.update(reference=reference, seconds=round(time.monotonic() - started, 3))
    if states == {"ok"}:
        first = ranks[0]
        framework = {k: first[k] for k in ("losses", "grad_norms", "weights")}
        for key in ("peak_bytes", "held_bytes"):  # measure_memory: every rank's, in rank order (memory.py)
            if key in first:
                framework[key] = [a[key] for a in ranks]
        return {**answer, "status": "ok", "framework": framework}
    if "unsupported" in states and states <= {"ok", "unsupported"}:
        return {**answer, "status": "unsupported", "message": next(a["message"] for a in ranks if "message" in a)}
    if "error" in states:
        pools.pop(case.world, None)
        return {**answer, "status": "error", "message": "; ".join(f"rank {a['rank']}: {a.get('message')}"
                                                                 for a in ranks if a["state"] == "error"),
                "ranks": rank_summary(ranks)}
    if not pool.alive:  # collect kept ranks that only raised, if they passed the health check
        pools.pop(case.world, None)
    status = "hang" if states <= {"ok", "stuck"} else "crash"
    return {**answer, "status": status, "stuck": [a["rank"] for a in ranks if a["state"] == "stuck"],
            "ranks": rank_summary(ranks)}


def main():
    parser = argparse.ArgumentParser(prog="python -m zero3py.runners", description=__doc__.split("\n")[0])
    parser.add_argument("--target", choices=TARGETS, required=True)
    parser.add_argument("--log-dir", help="the ranks' logs (default: a fresh temporary folder)")
    args = parser.parse_args()
    keep_stdout_for_answers()
    found = versions(args.target)
    import torch
    torch.set_num_threads(1)
    log_dir = args.log_dir or tempfile.mkdtemp(prefix=f"zero3-runner-{args.target}-")
    os.makedirs(log_dir, exist_ok=True)
    say({"protocol": 1, "hello": "zero3-runner", "target": args.target, "versions": found, "log_dir": log_dir})
    pools = {}
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                request = json.loads(line)
                assert isinstance(request, dict) and isinstance(request.get("fresh", False), bool) and (
                    is_repro_request(request) if "write_repro" in request else isinstance(request.get("case"), str))
            except (ValueError, AssertionError):
                say({"protocol": 1, "status": "error", "message": f"not a request: {line.strip()[:200]!r}"})
                continue
            if "write_repro" in request:
                say({"protocol": 1, **answer_repro(args.target, request, found)})
            else:
                say({"protocol": 1, **answer_case(pools, args.target, request, log_dir)})
    finally:
        for pool in pools.values():
            pool.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
