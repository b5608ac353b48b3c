"""FSDP2 (fully_shard) raises RuntimeError: to DTensor before calling distributed operators
torch 2.15.0+cu132, python 3.11.2; 2 processes over gloo on CPU; found by zero3's differential fuzz.
Run: /root/.cache/zero3/diff-venv/bin/python repro.py  # exit 1: it reproduces, 0: it does not, 2: it fails another way"""
import functools, math, re, sys, tempfile, torch, torch.distributed.fsdp as fsdp, torch.nn as nn
import torch.nn.functional as F
W, B, GAS, STEPS, SEED, ADAMW = 2, 1, 1, 1, 812503453, dict(lr=0.003, betas=(0.9, 0.95), weight_decay=0.0)
class RawScale(nn.Module):  # x * p, p read from its owner by the parent, handed in, without gradient
    def __init__(self, shape): super().__init__(); self.scale = nn.Parameter(torch.ones(shape))
    def forward(self, x, p): return x * p.detach()
class Layers(nn.Module):  # layers held in an nn.ModuleList `layers`, applied in order: each container and the model
    def __init__(self, *layers): super().__init__(); self.layers = nn.ModuleList(layers)
    def forward(self, x):  # a RawScale gets its parameter from here, its parent
        return functools.reduce(lambda x, m: m(x, m.scale) if isinstance(m, RawScale) else m(x), self.layers, x)
torch.manual_seed(SEED)  # the data: per step, GAS global batches of W*B rows; then the model's weights
DATA = [[(torch.randn(W * B, 2), torch.randn(W * B, 2)) for _ in range(GAS)] for _ in range(STEPS)]
model = Layers(RawScale([2]))
def train(rank, tmp):  # rank r of W: FSDP2's fully_shard on rows r*B..(r+1)*B of each global batch
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=rank, world_size=W)
    for unit in (model.layers[0], model): fsdp.fully_shard(unit)  # each module owning parameters, then the root
    adamw = torch.optim.AdamW(params := [p for p in model.parameters() if p.requires_grad], **ADAMW, foreach=False)
    for step in DATA:
        for x, y in step:
            F.mse_loss(model(x.chunk(W)[rank]), y.chunk(W)[rank])
        for p in params: p.grad = torch.zeros_like(p) if p.grad is None else p.grad  # none came: zero
        torch.nn.utils.clip_grad_norm_(params, math.inf, foreach=False)  # the norm only, as the harness's step
        adamw.step(); adamw.zero_grad()
if __name__ == "__main__":  # spawn raises once a rank raised or died, after stopping the others
    failure = ""
    try: torch.multiprocessing.spawn(train, (tempfile.mkdtemp(),), nprocs=W)
    except Exception as error: failure = str(error)  # the rank's traceback, or the signal or exit code
    expected = {"RuntimeError: to DTensor before calling distributed operators":
                [r"^(\w+\.)*RuntimeError\b", r"\bto DTensor before calling distributed operators\b"]}
    print(failure or "every rank finished", f"\nexpected: {' or '.join(expected)}")
    matched = [what for what, regexes in expected.items() if all(re.search(r, failure, re.M) for r in regexes)]
    print(f"reproduced: {matched[0]}" if matched
          else f"not reproduced: {'it fails another way' if failure else 'every rank finished'}")
    sys.exit(1 if matched else 2 if failure else 0)
