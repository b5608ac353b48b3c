"""FSDP2 (fully_shard) trains without an error, but its loss differs from plain PyTorch's
torch 2.15.0+cu132, python 3.11.2; 2 processes over gloo on CPU; found by zero3's differential fuzz.
Run: /root/.cache/zero3/diff-venv/bin/python repro.py  # exit 1: it reproduces, 0: it does not, 2: it fails another way"""
import functools, math, sys, tempfile, torch, torch.distributed.fsdp as fsdp, torch.nn as nn, torch.nn.functional as F
W, B, GAS, STEPS, SEED, ADAMW = 2, 1, 1, 2, 269781805, dict(lr=0.003, betas=(0.9, 0.95), weight_decay=0.1)
class RawScale(nn.Module):  # x * p, p a Parameter cached at construction (before sharding), without gradient
    def __init__(self, shape): super().__init__(); self.scale = self.__dict__["p"] = nn.Parameter(torch.ones(shape))
    def forward(self, x): return x * self.p.detach()
class Layers(nn.Module):  # layers held in an nn.ModuleList `layers`, applied in order: each container and the model
    def __init__(self, *layers): super().__init__(); self.layers = nn.ModuleList(layers)
    def forward(self, x): return functools.reduce(lambda x, layer: layer(x), self.layers, x)
torch.manual_seed(SEED)  # the data: per step, GAS global batches of W*B rows; then the model's weights
DATA = [[(torch.randn(W * B, 2), torch.randn(W * B, 2)) for _ in range(GAS)] for _ in range(STEPS)]
model = Layers(RawScale([2]))
def steps(model, rows):  # the harness's training on `rows` of each global batch -> the micro-steps' losses
    params, losses = [p for p in model.parameters() if p.requires_grad], []
    adamw = torch.optim.AdamW(params, **ADAMW, foreach=False)
    for step in DATA:
        for x, y in step:
            losses.append(F.mse_loss(model(x[rows]), y[rows]).item())
        for p in params: p.grad = torch.zeros_like(p) if p.grad is None else p.grad  # none came: zero
        torch.nn.utils.clip_grad_norm_(params, math.inf, foreach=False)  # the norm only, as the harness's step
        adamw.step(); adamw.zero_grad()
    return losses
def train(rank, results):  # rank r of W: FSDP2's fully_shard on rows r*B..(r+1)*B of each global batch
    torch.distributed.init_process_group("gloo", init_method=f"file://{results}/store", rank=rank, world_size=W)
    for unit in (model.layers[0], model): fsdp.fully_shard(unit)  # each module owning parameters, then the root
    torch.save(steps(model, slice(rank * B, (rank + 1) * B)), f"{results}/{rank}")
if __name__ == "__main__":  # each rank saves its numbers in `results`; spawn raises once a rank raised or died
    try: torch.multiprocessing.spawn(train, (results := tempfile.mkdtemp(),), nprocs=W)
    except Exception as error: sys.exit(print(error, "\nnot reproduced: it fails another way") or 2)
    ours = [sum(r) / W for r in zip(*(torch.load(f"{results}/{r}") for r in range(W)))]  # the mean over ranks
    losses = steps(model, slice(None))  # the reference: plain PyTorch, one process, the whole global batches
    print("FSDP2 (fully_shard) losses:", ours, "\nreference losses:", losses)
    off = [s for s, (a, b) in enumerate(zip(ours, losses)) if not abs(a - b) <= 1e-4 * abs(b)]
    print(f"reproduced: the loss is off from micro-step {off[0]}" if off else "not reproduced: the losses agree")
    sys.exit(1 if off else 0)
