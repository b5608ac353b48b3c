"""FSDP2 (fully_shard) raises NotImplementedError: does not have a sharding strategy registered
torch 2.15.0+cu132, python 3.11.2; 2 processes over gloo on CPU; found by zero3's differential fuzz.
Run: /root/.cache/zero3/diff-venv/bin/python repro.py  # exit 1: it reproduces, 0: it does not, 2: it fails another way"""
import functools, math, re, sys, tempfile, torch, torch.distributed.fsdp as fsdp, torch.nn as nn
import torch.nn.functional as F
W, B, GAS, STEPS, T, SEED, ADAMW = 2, 1, 2, 1, 1, 458149414, dict(lr=0.003, betas=(0.9, 0.95), weight_decay=0.0)
class TiedLinear(nn.Module):  # x @ W.T; W: an earlier layer's weight, registered there only
    def __init__(self, owner): super().__init__(); self.__dict__["owner"] = owner
    def forward(self, x): return F.linear(x, self.owner.weight)
class CausalSelfAttention(nn.Module):  # multi-head causal attention within each sequence of T rows
    def __init__(self, heads, qkv, proj): super().__init__(); self.heads, self.qkv, self.proj = heads, qkv, proj
    def forward(self, x): return self.proj(F.scaled_dot_product_attention(*self.qkv(x).reshape(len(x) // T, T, 3,
        self.heads, -1).permute(2, 0, 3, 1, 4), is_causal=True).transpose(1, 2).reshape(x.shape))
class Layers(nn.Module):  # layers held in an nn.ModuleList `layers`, applied in order: each container and the model
    def __init__(self, *layers): super().__init__(); self.layers = nn.ModuleList(layers)
    def forward(self, x): return functools.reduce(lambda x, layer: layer(x), self.layers, x)
torch.manual_seed(SEED)  # the data: per step, GAS global batches of W*B sequences; then the model's weights
DATA = [[(s[:, :-1], s[:, 1:]) for s in torch.randint(1, (GAS, W * B, T + 1))] for _ in range(STEPS)]
model = Layers(embedding := nn.Embedding(1, 1), CausalSelfAttention(1, nn.Linear(1, 3), nn.Linear(1, 1)),
               TiedLinear(embedding))
def train(rank, tmp):  # rank r of W: FSDP2's fully_shard on rows r*B..(r+1)*B of each global batch
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=rank, world_size=W)
    for unit in (model.layers[0], model.layers[1].qkv, model.layers[1].proj, model): fsdp.fully_shard(unit)
    adamw = torch.optim.AdamW(params := [p for p in model.parameters() if p.requires_grad], **ADAMW, foreach=False)
    for step in DATA:
        for micro, (x, y) in enumerate(step):
            model.set_requires_gradient_sync(micro == GAS - 1)  # FSDP2 reduce-scatters the gradients at the last one
            (F.cross_entropy(model(x.chunk(W)[rank].flatten()), y.chunk(W)[rank].flatten()) / GAS).backward()
        torch.nn.utils.clip_grad_norm_(params, math.inf, foreach=False)  # the norm only, as the harness's step
        adamw.step(); adamw.zero_grad()
if __name__ == "__main__":  # spawn raises once a rank raised or died, after stopping the others
    failure = ""
    try: torch.multiprocessing.spawn(train, (tempfile.mkdtemp(),), nprocs=W)
    except Exception as error: failure = str(error)  # the rank's traceback, or the signal or exit code
    expected = {"NotImplementedError: does not have a sharding strategy registered":
                [r"^(\w+\.)*NotImplementedError\b", r"\bdoes not have a sharding strategy registered\b"]}
    print(failure or "every rank finished", f"\nexpected: {' or '.join(expected)}")
    matched = [what for what, regexes in expected.items() if all(re.search(r, failure, re.M) for r in regexes)]
    print(f"reproduced: {matched[0]}" if matched
          else f"not reproduced: {'it fails another way' if failure else 'every rank finished'}")
    sys.exit(1 if matched else 2 if failure else 0)
