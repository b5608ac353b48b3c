"""One rank process of a runner (pool.py starts W of them): joins the gloo process group once,
warms up (one small case trained with the target, so imports, the framework's op builds and the
first collectives are paid before any case's clock starts), then trains each case the supervisor
sends on stdin with the target's function (targets.py) and answers one JSON line per case on its
stdout; everything else it or a framework prints goes to stderr, which the supervisor keeps in a
per-rank log for a crash's "last output". SIGUSR1 dumps every thread's Python stack to that log
(faulthandler), which is how the supervisor tells where a stuck rank waits.

    python -m zero3py.runners.rank --target deepspeed --rank 0 --world 2 --port 29500
"""
import argparse
import datetime
import faulthandler
import json
import os
import signal
import sys
import tempfile
import traceback


def raised_where(error):
    """"module.py:function" of the frame that raised, the framework's own when it has one: what,
    with the exception's type and message, tells one bug from another."""
    frames = traceback.extract_tb(error.__traceback__)
    framework = [f for f in frames if "/deepspeed/" in f.filename or "/torch/distributed/" in f.filename]
    frame = (framework or frames)[-1]
    return f"{os.path.basename(frame.filename)}:{frame.name}"


def warm_up(train, rank, world):
    """Trains a two-layer case once with the target: the first deepspeed.initialize (or fully_shard)
    of a process pays for lazy imports, op builders and the process group's first collectives,
    seconds on a busy machine, which would otherwise count against the first real case's limit."""
    import torch
    from zero3py.runners.case import Case, default_settings
    settings = default_settings({"kind": "sequential", "input_width": 4, "loss": "mse",
                                 "layers": [{"type": "linear", "out": 4}, {"type": "gelu"}, {"type": "linear", "out": 2}]},
                                world, steps=1, micro_batch=1)
    generator = torch.Generator().manual_seed(0)
    init = {"layers.0.weight": torch.randn(4, 4, generator=generator), "layers.0.bias": torch.zeros(4),
            "layers.2.weight": torch.randn(2, 4, generator=generator), "layers.2.bias": torch.zeros(2)}
    data = {"step0.micro0.inputs": torch.randn(world, 4, generator=generator),
            "step0.micro0.targets": torch.randn(world, 2, generator=generator)}
    with tempfile.TemporaryDirectory(prefix=f"zero3-warm-up-{rank}-") as directory:
        train(Case(directory, settings, init, data), rank, world, os.path.join(directory, "w.safetensors"))


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
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
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
    train = TARGETS[args.target]
    warm_up(train, args.rank, args.world)
    print("=== zero3 runner: warm", file=sys.stderr, flush=True)
    answers.write(json.dumps({"ready": args.rank}) + "\n")
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
