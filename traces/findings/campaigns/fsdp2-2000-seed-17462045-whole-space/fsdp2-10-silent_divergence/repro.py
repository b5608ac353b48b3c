"""FSDP2 (fully_shard) trains without an error, but its final weights differ from plain PyTorch's
torch 2.15.0+cu132, python 3.11.2; 1 process over gloo on CPU; found by zero3's differential fuzz.
Run: /root/.cache/zero3/diff-venv/bin/python repro.py  # exit 1: it reproduces, 0: it does not, 2: it fails another way"""
import functools, math, sys, tempfile, torch, torch.distributed.fsdp as fsdp, torch.nn as nn, torch.nn.functional as F
W, B, GAS, STEPS, SEED, ADAMW = 1, 1, 1, 1, 860180284, dict(lr=0.003, betas=(0.9, 0.95), weight_decay=0.1)
class UnusedLinear(nn.Linear): forward = nn.Identity.forward  # registers a weight (and bias) its forward never uses
class Layers(nn.Module):  # layers held in an nn.ModuleList `layers`, applied in order: each container and the model
    def __init__(self, *layers): super().__init__(); self.layers = nn.ModuleList(layers)
    def forward(self, x): return functools.reduce(lambda x, layer: layer(x), self.layers, x)
torch.manual_seed(SEED)  # the data: per step, GAS global batches of W*B rows; then the model's weights
DATA = [[(torch.randn(W * B, 0), torch.randint(1, (W * B,))) for _ in range(GAS)] for _ in range(STEPS)]
model = Layers(UnusedLinear(0, 11), nn.Linear(0, 1).requires_grad_(False))
def steps(model, rows):  # the harness's training on `rows` of each global batch -> its AdamW
    adamw = torch.optim.AdamW(params := [p for p in model.parameters() if p.requires_grad], **ADAMW, foreach=False)
    for step in DATA:
        for x, y in step:
            F.cross_entropy(model(x[rows]), y[rows])  # no backward: no trainable parameter reaches the loss
        for p in params: p.grad = torch.zeros_like(p) if p.grad is None else p.grad  # none came: zero
        torch.nn.utils.clip_grad_norm_(params, math.inf, foreach=False)  # the norm only, as the harness's step
        adamw.step(); adamw.zero_grad()
    return adamw
def train(rank, results):  # rank r of W: FSDP2's fully_shard on rows r*B..(r+1)*B of each global batch
    torch.distributed.init_process_group("gloo", init_method=f"file://{results}/store", rank=rank, world_size=W)
    for unit in (model.layers[0], model.layers[1], model): fsdp.fully_shard(unit)
    steps(model, slice(rank * B, (rank + 1) * B))
    torch.save({n: p.full_tensor() for n, p in model.named_parameters()}, f"{results}/{rank}")
if __name__ == "__main__":  # each rank saves its numbers in `results`; spawn raises once a rank raised or died
    try: torch.multiprocessing.spawn(train, (results := tempfile.mkdtemp(),), nprocs=W)
    except Exception as error: sys.exit(print(error, "\nnot reproduced: it fails another way") or 2)
    start, ours, error = {n: p.detach().clone() for n, p in model.named_parameters()}, torch.load(f"{results}/0"), {}
    adamw = steps(model, slice(None))  # the reference: plain PyTorch, one process, the whole global batches
    for n, p in model.named_parameters():  # as the harness: the elements a gradient above 1e-5 moved (frozen: all)
        moved = (adamw.state[p].get("exp_avg_sq", torch.ones_like(p)) / (1 - ADAMW["betas"][1])).sqrt() >= 1e-5
        if ours[n].shape != p.shape: error[n] = f"shape {list(ours[n].shape)}, the reference's {list(p.shape)}"
        elif (r := p.detach()[moved]).numel():  # the distance from the reference, over its update
            error[n] = float((ours[n][moved] - r).norm() / ((r - start[n][moved]).norm() + 1e-6 * r.numel() ** 0.5))
    off = {n: e for n, e in error.items() if isinstance(e, str) or not e <= 1e-3}  # name: its distance
    print(f"reproduced: weights off the reference's: {off}" if off else f"not reproduced: the weights agree: {error}")
    sys.exit(1 if off else 0)
