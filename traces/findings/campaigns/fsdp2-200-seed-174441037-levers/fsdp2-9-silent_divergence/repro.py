"""FSDP2 (fully_shard) trains without an error, but its gradient norm differs from plain PyTorch's
torch 2.15.0+cu132, python 3.11.2; 2 processes over gloo on CPU; found by zero3's differential fuzz.
Run: /root/.cache/zero3/diff-venv/bin/python repro.py  # exit 1: it reproduces, 0: it does not, 2: it fails another way"""
import collections, functools, math, sys, tempfile, torch, torch.distributed.fsdp as fsdp, torch.nn as nn
import torch.nn.functional as F
W, B, GAS, STEPS, ADAMW = 2, 2, 1, 1, dict(lr=0.003, betas=(0.9, 0.95), eps=1e-08, weight_decay=0.1)
class Moe(nn.Module):  # top-1 routing: a row goes to its argmax expert, scaled by that expert's probability
    def __init__(self, width, experts, hidden):  # each expert: fc, tanh GELU, proj
        super().__init__(); self.gate = nn.Linear(width, experts)
        self.experts = nn.ModuleList(nn.Sequential(collections.OrderedDict(fc=nn.Linear(width, hidden),
            gelu=nn.GELU("tanh"), proj=nn.Linear(hidden, width))) for _ in range(experts))
    def forward(self, x):  # only the experts some row chose run: ranks may run different experts
        probs, choice, out = torch.softmax(logits := self.gate(x), -1), logits.argmax(-1), torch.zeros_like(x)
        for e in choice.unique().tolist():
            out.index_add_(0, rows := (choice == e).nonzero()[:, 0], self.experts[e](x[rows]) * probs[rows, e:e + 1])
        return out
class Layers(nn.Module):  # layers held in an nn.ModuleList `layers`, applied in order: each container and the model
    def __init__(self, *layers): super().__init__(); self.layers = nn.ModuleList(layers)
    def forward(self, x): return functools.reduce(lambda x, layer: layer(x), self.layers, x)
# The case's own data and initial weights, each float32 bit for bit: seed-drawn ones did not reproduce it
BATCHES = [[[[[0.76077586, -0.7834054, 2.4189355], [0.28622785, -1.7667208, 0.21167406],
    [-0.3039512, -0.62939733, -1.0477972], [-0.27706388, -0.30426508, -1.4173447]],
    [[-0.23920873, 0.56107247, -0.30227312], [0.09931044, 1.3189777, -0.30866012],
    [-0.06275536, 0.78871185, -0.10420549], [-0.07224429, 0.43579757, 0.010710207]]]]]
DATA = [[(torch.tensor(x), torch.tensor(y)) for x, y in step] for step in BATCHES]
model = Layers(Moe(3, 2, 2))
INIT = {"layers.0.gate.weight": [-0.435564, -1.223491, -0.03191903, 0.1304789, -0.34411278, -0.73017323],
    "layers.0.gate.bias": [0.0] * 2, "layers.0.experts.0.fc.weight": [-0.78274846, -0.4160388, 0.14159708, 0.14060345,
    -0.3738253, -0.7684679], "layers.0.experts.0.fc.bias": [0.0] * 2, "layers.0.experts.0.proj.weight": [0.79631907,
    1.1836393, 0.9941515, 0.09436541, -0.27703142, -0.42976484], "layers.0.experts.0.proj.bias": [0.0] * 3,
    "layers.0.experts.1.fc.weight": [-0.28292525, -0.6894621, 0.42353046, -0.32274392, 0.026278201, -0.3462113],
    "layers.0.experts.1.fc.bias": [0.0] * 2, "layers.0.experts.1.proj.weight": [0.34142125, 0.16690134, 0.53188485,
    0.3183424, -0.36638018, -0.8362755], "layers.0.experts.1.proj.bias": [0.0] * 3}
for n, v in INIT.items(): (p := model.get_parameter(n)).data.copy_(torch.tensor(v).view_as(p))  # in its shape
def steps(model, rows):  # the harness's training on `rows` of each global batch -> the gradient norms
    params, norms = [p for p in model.parameters() if p.requires_grad], []
    adamw = torch.optim.AdamW(params, **ADAMW, foreach=False)
    for step in DATA:
        for x, y in step: (F.mse_loss(model(x[rows]), y[rows]) / GAS).backward()
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
