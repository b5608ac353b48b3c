"""FSDP2 (fully_shard) trains without an error, but its gradient norm differs from plain PyTorch's
torch 2.15.0+cu132, python 3.11.2; 2 processes over gloo on CPU; found by zero3's differential fuzz.
Run: /root/.cache/zero3/diff-venv/bin/python repro.py  # exit 1: it reproduces, 0: it does not, 2: it fails another way"""
import collections, functools, math, sys, tempfile, torch, torch.distributed.fsdp as fsdp, torch.nn as nn
import torch.nn.functional as F
W, B, GAS, STEPS, SEED, ADAMW = 2, 1, 1, 1, 482283723, dict(lr=0.003, betas=(0.9, 0.95), weight_decay=0.1)
class Moe(nn.Module):  # top-1 routing: a row goes to its argmax expert, scaled by that expert's probability
    def __init__(self, w, n, h): super().__init__(); self.gate, self.experts = nn.Linear(w, n), nn.ModuleList(
            nn.Sequential(collections.OrderedDict(fc=nn.Linear(w, h), gelu=nn.GELU("tanh"), proj=nn.Linear(h, w)))
            for _ in range(n))  # n experts, each fc (w -> h), tanh GELU, proj (h -> w)
    def forward(self, x):  # only the experts some row chose run: ranks may run different experts
        probs, choice, out = torch.softmax(logits := self.gate(x), -1), logits.argmax(-1), torch.zeros_like(x)
        for e in choice.unique().tolist(): out[m] = self.experts[e](x[m := choice == e]) * probs[m, e:e + 1]
        return out
class Layers(nn.Module):  # layers held in an nn.ModuleList `layers`, applied in order: each container and the model
    def __init__(self, *layers): super().__init__(); self.layers = nn.ModuleList(layers)
    def forward(self, x): return functools.reduce(lambda x, layer: layer(x), self.layers, x)
torch.manual_seed(SEED)  # the data: per step, GAS global batches of W*B rows; then the model's weights
DATA = [[(torch.randn(W * B, 5), torch.randint(5, (W * B,))) for _ in range(GAS)] for _ in range(STEPS)]
model = Layers(Moe(5, 2, 1))
def steps(model, rows):  # the harness's training on `rows` of each global batch -> the gradient norms
    params, norms = [p for p in model.parameters() if p.requires_grad], []
    adamw = torch.optim.AdamW(params, **ADAMW, foreach=False)
    for step in DATA:
        for x, y in step: (F.cross_entropy(model(x[rows]), y[rows]) / GAS).backward()
        for p in params: p.grad = torch.zeros_like(p) if p.grad is None else p.grad  # none came: zero
        norms.append(float(torch.nn.utils.clip_grad_norm_(params, math.inf, foreach=False)))  # before clipping
        adamw.step(); adamw.zero_grad()
    return norms
def train(rank, results):  # rank r of W: FSDP2's fully_shard on rows r*B..(r+1)*B of each global batch
    torch.distributed.init_process_group("gloo", init_method=f"file://{results}/store", rank=rank, world_size=W)
    for unit in (model.layers[0], model): fsdp.fully_shard(unit)  # the runner's units: leaves whole, the root last
    torch.save(steps(model, slice(rank * B, (rank + 1) * B)), f"{results}/{rank}")
if __name__ == "__main__":  # each rank saves its numbers in `results`; spawn raises once a rank raised or died
    try: torch.multiprocessing.spawn(train, (results := tempfile.mkdtemp(),), nprocs=W)
    except Exception as error: sys.exit(print(error, "\nnot reproduced: it fails another way") or 2)
    ours = torch.load(f"{results}/0")
    norms = steps(model, slice(None))  # the reference: plain PyTorch, one process, the whole global batches
    print("FSDP2 (fully_shard) gradient norms:", ours, "\nreference gradient norms:", norms)
    off = [s for s, (a, b) in enumerate(zip(ours, norms)) if not abs(a - b) <= 1e-3 * abs(b) + 1e-5]
    print(f"reproduced: the gradient norm is off from step {off[0]}" if off else "not reproduced: the norms agree")
    sys.exit(1 if off else 0)
