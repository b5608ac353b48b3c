"""FSDP2 (fully_shard) raises RuntimeError: to DTensor before calling distributed operators
torch 2.15.0+cu132, python 3.11.2; 1 process over gloo on CPU; found by zero3's differential fuzz.
Run: /root/.cache/zero3/diff-venv/bin/python repro.py  # exit 1: it reproduces, 0: it does not, 2: it fails another way"""
import functools, math, re, sys, tempfile, torch, torch.distributed.fsdp as fsdp, torch.nn as nn
import torch.nn.functional as F
W, B, GAS, STEPS, T, SEED, ADAMW = 1, 1, 1, 1, 1, 905914217, dict(lr=0.003, betas=(0.9, 0.95), weight_decay=0.1)
class TiedLinear(nn.Module):  # x @ W.T; W: an earlier layer's weight, registered there only
    def __init__(self, owner): super().__init__(); self.__dict__["owner"] = owner
    def forward(self, x): return F.linear(x, self.owner.weight)
class Layers(nn.Module):  # layers held in an nn.ModuleList `layers`, applied in order: each container and the model
    def __init__(self, *layers): super().__init__(); self.layers = nn.ModuleList(layers)
    def forward(self, x): return functools.reduce(lambda x, layer: layer(x), self.layers, x)
torch.manual_seed(SEED)  # the data: per step, GAS global batches of W*B sequences; then the model's weights
DATA = [[(s[:, :-1], s[:, 1:]) for s in torch.randint(2, (GAS, W * B, T + 1))] for _ in range(STEPS)]
model = Layers(embedding := nn.Embedding(2, 0), TiedLinear(embedding))
def train(rank, tmp):  # rank r of W: FSDP2's fully_shard on rows r*B..(r+1)*B of each global batch
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=rank, world_size=W)
    for unit in (model.layers[0], model): fsdp.fully_shard(unit)  # each module owning parameters, then the root
    adamw = torch.optim.AdamW(params := [p for p in model.parameters() if p.requires_grad], **ADAMW, foreach=False)
    for step in DATA:
        for x, y in step:
            (F.cross_entropy(model(x.chunk(W)[rank].flatten()), y.chunk(W)[rank].flatten()) / GAS).backward()
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
