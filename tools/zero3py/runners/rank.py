"""One rank process of a runner (pool.py forks W of them from a server that imported everything
once, preload.py): joins the gloo process group once, warms up (one small case trained with the
target, so the framework's op builds and the first collectives are paid before any case's clock
starts), then trains each case the supervisor sends over its pipe with the target's function
(targets.py) and answers one JSON message per case on the same pipe; everything it or a framework
prints goes to the rank's log, which the supervisor reads for a crash's "last output". SIGUSR1 dumps
every thread's Python stack to that log (faulthandler), which is how the supervisor tells where a
stuck rank waits.
"""
import datetime
import faulthandler
import gc
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


def log_to(log_path):
    """Sends fd 1 and 2 (Python's prints, a framework's C++ logs, faulthandler's dumps) to the rank's
    log: the server it was forked from shares the supervisor's stdout, which is the protocol."""
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)


def train_one(train, request, rank, world):
    """A case request -> the rank's answer (PROTOCOL.md, "ranks")."""
    from zero3py.runners.case import CaseError, read_case
    from zero3py.runners.training import Unsupported
    try:
        case = read_case(request["case"])
        return {"state": "ok", **train(case, rank, world, request["weights"])}
    except CaseError as error:
        return {"state": "error", "message": str(error)}
    except Unsupported as error:
        return {"state": "unsupported", "message": str(error)}
    except Exception as error:  # the framework's failure: reported, never raised past the protocol
        traceback.print_exc(file=sys.stderr)
        return {"state": "exception", "exception_type": f"{type(error).__module__}.{type(error).__qualname__}",
                "message": str(error), "where": raised_where(error), "traceback": traceback.format_exc()[-3000:]}


def serve(target, rank, world, port, conn, log_path):
    """The body of a forked rank: conn is its end of the supervisor's pipe (one JSON message per
    request and per answer); it returns when the supervisor closes the pipe."""
    log_to(log_path)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    # What torchrun would set: DeepSpeed reads them even with the process group already up.
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch
    import torch.distributed as dist
    from zero3py.runners.targets import TARGETS
    torch.set_num_threads(1)  # ranks share the cores; one thread each keeps ATen's sums in one order
    # The supervisor kills ranks on its own timeout; gloo's must only be longer than any case.
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=3600))
    if target == "deepspeed":
        import deepspeed
        # DeepSpeed's communication backend JIT-compiles its shared-memory op the first time a
        # machine (or a copy of the package) runs it: a minute or more on 2 cores. Done here, it
        # counts against the pool's start timeout, never as a case's hang.
        deepspeed.comm.init_distributed(dist_backend="gloo", auto_mpi_discovery=False)
    train = TARGETS[target]
    warm_up(train, rank, world)
    # Everything alive now (modules, the framework's caches) lives as long as the rank: frozen, the
    # collector no longer walks it, and DeepSpeed calls gc.collect() in every initialize (0.5 s of a
    # warm 1-second case before). Garbage of later cases is collected as before.
    gc.collect()
    gc.freeze()
    print("=== zero3 runner: warm", file=sys.stderr, flush=True)
    conn.send_bytes(json.dumps({"ready": rank}).encode())
    while True:
        try:
            request = json.loads(conn.recv_bytes())
        except EOFError:  # the supervisor closed the pool
            return
        if "health" in request:  # after every rank raised: is the process group still in step?
            total = torch.tensor([float(rank + 1)])
            dist.all_reduce(total)
            conn.send_bytes(json.dumps({"state": "health", "sum": float(total)}).encode())
            continue
        print(f"=== zero3 runner: case {request['case']}", file=sys.stderr, flush=True)
        answer = train_one(train, request, rank, world)
        sys.stderr.flush()
        conn.send_bytes(json.dumps(answer).encode())
