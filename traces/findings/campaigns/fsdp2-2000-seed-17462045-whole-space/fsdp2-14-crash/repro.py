"""FSDP2 (fully_shard) raises RuntimeError: Sharding propagation failed for aten
torch 2.15.0+cu132, python 3.11.2; 1 process over gloo on CPU; found by zero3's differential fuzz.
Run: /root/.cache/zero3/diff-venv/bin/python repro.py  # exit 1: it reproduces, 0: it does not, 2: it fails another way"""
import collections, functools, math, re, sys, tempfile, torch, torch.distributed.fsdp as fsdp, torch.nn as nn
import torch.nn.functional as F
W, B, GAS, STEPS, SEED, ADAMW = 1, 1, 1, 1, 385339880, dict(lr=0.003, betas=(0.9, 0.95), weight_decay=0.0)
class RawScale(nn.Module):  # x * p, p read from its owner by the parent, handed in, without gradient
    def __init__(self, shape): super().__init__(); self.scale = nn.Parameter(torch.ones(shape))
    def forward(self, x, p): return x * p.detach()
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
    def forward(self, x):  # a RawScale gets its parameter from here, its parent
        return functools.reduce(lambda x, m: m(x, m.scale) if isinstance(m, RawScale) else m(x), self.layers, x)
torch.manual_seed(SEED)  # the data: per step, GAS global batches of W*B rows; then the model's weights
DATA = [[(torch.randn(W * B, 1), torch.randint(1, (W * B,))) for _ in range(GAS)] for _ in range(STEPS)]
model = Layers(RawScale([1]), Moe(1, 1, 0))
def train(rank, tmp):  # rank r of W: FSDP2's fully_shard on rows r*B..(r+1)*B of each global batch
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=rank, world_size=W)
    for unit in (model.layers[1], model.layers[0], model): fsdp.fully_shard(unit)
    adamw = torch.optim.AdamW(params := [p for p in model.parameters() if p.requires_grad], **ADAMW, foreach=False)
    for step in DATA:
        for x, y in step: (F.cross_entropy(model(x.chunk(W)[rank]), y.chunk(W)[rank]) / GAS).backward()
        for p in params: p.grad = torch.zeros_like(p) if p.grad is None else p.grad  # none came: zero
        torch.nn.utils.clip_grad_norm_(params, math.inf, foreach=False)  # the norm only, as the harness's step
        adamw.step(); adamw.zero_grad()
if __name__ == "__main__":  # spawn raises once a rank raised or died, after stopping the others
    failure = ""
    try: torch.multiprocessing.spawn(train, (tempfile.mkdtemp(),), nprocs=W)
    except Exception as error: failure = str(error)  # the rank's traceback, or the signal or exit code
    expected = {"RuntimeError: Sharding propagation failed for aten":  # what: the regexes its traceback matches
                [r"^(\w+\.)*RuntimeError\b", r"\bSharding propagation failed for aten\b"]}
    print(failure or "every rank finished", f"\nexpected: {' or '.join(expected)}")
    matched = [what for what, regexes in expected.items() if all(re.search(r, failure, re.M) for r in regexes)]
    print(f"reproduced: {matched[0]}" if matched
          else f"not reproduced: {'it fails another way' if failure else 'every rank finished'}")
    sys.exit(1 if matched else 2 if failure else 0)
