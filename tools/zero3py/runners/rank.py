"""One rank process of a runner (pool.py starts W of them): joins the gloo process group once,
then trains each case the supervisor sends on stdin with the target's function (targets.py) and
answers one JSON line per case on its stdout; everything else it or a framework prints goes to
stderr, which the supervisor keeps in a per-rank log for a crash's "last output".

    python -m zero3py.runners.rank --target deepspeed --rank 0 --world 2 --port 29500
"""
import argparse
import datetime
import json
import os
import sys
import traceback


def raised_where(error):
    """"module.py:function" of the frame that raised, the framework's own when it has one: what,
    with the exception's type and message, tells one bug from another."""
    frames = traceback.extract_tb(error.__traceback__)
    framework = [f for f in frames if "/deepspeed/" in f.filename or "/torch/distributed/" in f.filename]
    frame = (framework or frames)[-1]
    return f"{os.path.basename(frame.filename)}:{frame.name}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    # Answers keep the real stdout; whatever else writes to stdout (DeepSpeed's prints) goes to the log.
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    import torch
    import torch.distributed as dist
    from zero3py.runners.case import CaseError, read_case
    from zero3py.runners.targets import TARGETS
    from zero3py.runners.training import Unsupported
    if args.target == "deepspeed":
        import deepspeed  # noqa: F401  imported once here, so a case costs training only
        import logging
        from deepspeed.utils import logger
        logger.setLevel(logging.WARNING)
    torch.set_num_threads(1)  # ranks share the cores; one thread each keeps ATen's sums in one order
    # The supervisor kills ranks on its own timeout; gloo's must only be longer than any case.
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=args.rank,
                            world_size=args.world, timeout=datetime.timedelta(seconds=3600))
    if args.target == "deepspeed":
        # DeepSpeed's communication backend JIT-compiles its shared-memory op the first time a
        # machine (or a copy of the package) runs it: a minute or more on 2 cores. Done here, it
        # counts against the pool's start timeout, never as a case's hang.
        deepspeed.comm.init_distributed(dist_backend="gloo", auto_mpi_discovery=False)
    answers.write(json.dumps({"ready": args.rank}) + "\n")
    train = TARGETS[args.target]
    for line in sys.stdin:
        request = json.loads(line)
        if "health" in request:  # after every rank raised: is the process group still in step?
            total = torch.tensor([float(args.rank + 1)])
            dist.all_reduce(total)
            answers.write(json.dumps({"state": "health", "sum": float(total)}) + "\n")
            continue
        print(f"=== zero3 runner: case {request['case']}", file=sys.stderr, flush=True)
        try:
            case = read_case(request["case"])
            result = train(case, args.rank, args.world, request["weights"])
            answer = {"state": "ok", **result}
        except CaseError as error:
            answer = {"state": "error", "message": str(error)}
        except Unsupported as error:
            answer = {"state": "unsupported", "message": str(error)}
        except Exception as error:  # the framework's failure: reported, never raised past the protocol
            answer = {"state": "exception", "exception_type": f"{type(error).__module__}.{type(error).__qualname__}",
                      "message": str(error), "where": raised_where(error), "traceback": traceback.format_exc()[-3000:]}
            traceback.print_exc(file=sys.stderr)
        sys.stderr.flush()
        answers.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    main()
