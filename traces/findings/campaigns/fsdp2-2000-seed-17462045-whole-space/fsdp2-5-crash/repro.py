"""FSDP2 (fully_shard) fails: a rank killed by SIGABRT
torch 2.15.0+cu132, python 3.11.2; 2 processes over gloo on CPU; found by zero3's differential fuzz.
Run: /root/.cache/zero3/diff-venv/bin/python repro.py  # exit 1: it reproduces, 0: it does not, 2: it fails another way"""
import collections, functools, math, re, sys, tempfile, torch, torch.distributed.fsdp as fsdp, torch.nn as nn
import torch.nn.functional as F
W, B, GAS, STEPS, SEED, ADAMW = 2, 1, 2, 1, 865750223, dict(lr=0.003, betas=(0.9, 0.95), weight_decay=0.0)
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
DATA = [[(torch.randn(W * B, 1), torch.randint(1, (W * B,))) for _ in range(GAS)] for _ in range(STEPS)]
model = Layers(Moe(1, 2, 3))
def train(rank, tmp):  # rank r of W: FSDP2's fully_shard on rows r*B..(r+1)*B of each global batch
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=rank, world_size=W)
    for unit in (model.layers[0], model): fsdp.fully_shard(unit)  # the runner's units: leaves whole, the root last
    adamw = torch.optim.AdamW(params := [p for p in model.parameters() if p.requires_grad], **ADAMW, foreach=False)
    for step in DATA:
        for micro, (x, y) in enumerate(step):
            model.set_requires_gradient_sync(micro == GAS - 1)  # FSDP2 reduce-scatters the gradients at the last one
            (F.cross_entropy(model(x.chunk(W)[rank]), y.chunk(W)[rank]) / GAS).backward()
        for p in params: p.grad = torch.zeros_like(p) if p.grad is None else p.grad  # none came: zero
        torch.nn.utils.clip_grad_norm_(params, math.inf, foreach=False)  # the norm only, as the harness's step
        adamw.step(); adamw.zero_grad()
if __name__ == "__main__":  # spawn raises once a rank raised or died, after stopping the others
    failure = ""
    try: torch.multiprocessing.spawn(train, (tempfile.mkdtemp(),), nprocs=W)
    except Exception as error: failure = str(error)  # the rank's traceback, or the signal or exit code
    expected = {"SIGABRT": [r"\bsignal SIGABRT\b"],  # what: the regexes its traceback matches
                "RuntimeError: This is typically caused by a remote worker":
                [r"^(\w+\.)*RuntimeError\b", r"\bThis is typically caused by a remote worker\b"]}
    print(failure or "every rank finished", f"\nexpected: {' or '.join(expected)}")
    matched = [what for what, regexes in expected.items() if all(re.search(r, failure, re.M) for r in regexes)]
    print(f"reproduced: {matched[0]}" if matched
          else f"not reproduced: {'it fails another way' if failure else 'every rank finished'}")
    sys.exit(1 if matched else 2 if failure else 0)
