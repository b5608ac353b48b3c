"""DeepSpeed ZeRO-3 trains without an error, but its final weights differ from plain PyTorch's
torch 2.15.0+cu132, deepspeed 0.19.8, python 3.11.2; 2 processes over gloo on CPU; found by zero3's differential fuzz.
Run: DS_ACCELERATOR=cpu /root/.cache/zero3/diff-venv/bin/python repro.py  # exit 1: it reproduces, 0: it does not, 2: it fails another way"""
import functools, os, sys, tempfile, deepspeed, torch, torch.nn as nn, torch.nn.functional as F
W, B, GAS, STEPS, T, SEED = 2, 1, 1, 1, 1, 821308443
ADAMW = dict(lr=0.003, betas=(0.9, 0.95), eps=1e-08, weight_decay=0.1)
class TiedLinear(nn.Module):  # x @ W.T; W: an earlier layer's weight, registered there only
    def __init__(self, owner): super().__init__(); self.__dict__["owner"] = owner
    def forward(self, x): return F.linear(x, self.owner.weight)
class Scale(nn.Module):  # x * scale, starting at ones
    def __init__(self, shape): super().__init__(); self.scale = nn.Parameter(torch.ones(shape))
    def forward(self, x): return (x.reshape(len(x), x.shape[1], 1) * self.scale).reshape(len(x), -1)
class RawScale(nn.Module):  # x * p, p a Parameter cached at construction (before sharding), without gradient
    def __init__(self, p): super().__init__(); self.__dict__["p"] = p
    def forward(self, x): return (x.reshape(len(x), x.shape[1], 1) * self.p.detach()).reshape(len(x), -1)
class CausalSelfAttention(nn.Module):  # multi-head causal attention within each sequence of T rows
    def __init__(self, heads, qkv, proj): super().__init__(); self.heads, self.qkv, self.proj = heads, qkv, proj
    def forward(self, x): return self.proj(F.scaled_dot_product_attention(*self.qkv(x).reshape(len(x) // T, T, 3,
        self.heads, -1).permute(2, 0, 3, 1, 4), is_causal=True).transpose(1, 2).reshape(x.shape))
class Layers(nn.Module):  # layers held in an nn.ModuleList `layers`, applied in order: each container and the model
    def __init__(self, *layers): super().__init__(); self.layers = nn.ModuleList(layers)
    def forward(self, x): return functools.reduce(lambda x, layer: layer(x), self.layers, x)
class Residual(Layers):  # x + layers(x)
    def forward(self, x): return x + super().forward(x)
class SumResidual(Layers):  # x + the row sums of layers(x)
    def forward(self, x): return x + (y := super().forward(x)) @ torch.ones(y.shape[-1], 1)
torch.manual_seed(SEED)  # the data: per step, GAS global batches of W*B sequences; then the model's weights
DATA = [[(s[:, :-1], s[:, 1:]) for s in torch.randint(9, (GAS, W * B, T + 1))] for _ in range(STEPS)]
model = Layers(embedding := nn.Embedding(9, 2),
               Residual(CausalSelfAttention(1, nn.Linear(2, 6, bias=False), nn.Linear(2, 2))),
               SumResidual(scale := Scale([2, 1]), RawScale(scale.scale)),
               CausalSelfAttention(1, nn.Linear(2, 6, bias=False), nn.Linear(2, 2)), TiedLinear(embedding),
               nn.Linear(9, 9))
CONFIG = dict(train_micro_batch_size_per_gpu=1, gradient_clipping=0.0, zero_optimization=dict(stage=3,
    stage3_param_persistence_threshold=0, stage3_prefetch_bucket_size=1000000000, reduce_bucket_size=6,
    stage3_max_live_parameters=146, stage3_max_reuse_distance=0, contiguous_gradients=False))
def train(rank, results):  # rank r of W: DeepSpeed ZeRO-3 on rows r*B..(r+1)*B of each global batch
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(W))  # DeepSpeed reads them
    torch.distributed.init_process_group("gloo", init_method=f"file://{results}/store", rank=rank, world_size=W)
    adamw = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], **ADAMW, foreach=False)
    engine = deepspeed.initialize(model=model, optimizer=adamw, config=CONFIG)[0]
    for x, y in sum(DATA, []):  # each micro-step: DeepSpeed divides its loss by GAS, steps AdamW at every GAS-th
        engine.backward(F.cross_entropy(engine(x.chunk(W)[rank].flatten()), y.chunk(W)[rank].flatten()))
        engine.step()
    with deepspeed.zero.GatheredParameters(model.parameters()): torch.save(model.state_dict(), f"{results}/{rank}")
if __name__ == "__main__":  # each rank saves its numbers in `results`; spawn raises once a rank raised or died
    try: torch.multiprocessing.spawn(train, (results := tempfile.mkdtemp(),), nprocs=W)
    except Exception as error: sys.exit(print(error, "\nnot reproduced: it fails another way") or 2)
    start, ours, error = {n: p.detach().clone() for n, p in model.named_parameters()}, torch.load(f"{results}/0"), {}
    adamw = torch.optim.AdamW(params := [p for p in model.parameters() if p.requires_grad], **ADAMW, foreach=False)
    for step in DATA:  # the reference: plain PyTorch, one process, the whole global batches
        for x, y in step: (F.cross_entropy(model(x.flatten()), y.flatten()) / GAS).backward()
        adamw.step(); adamw.zero_grad()
    for n, p in model.named_parameters():  # as the harness: the elements a gradient above 1e-5 moved (frozen: all)
        moved = (adamw.state[p].get("exp_avg_sq", torch.ones_like(p)) / (1 - ADAMW["betas"][1])).sqrt() >= 1e-5
        if ours[n].shape != p.shape: error[n] = f"shape {list(ours[n].shape)}, the reference's {list(p.shape)}"
        elif (r := p.detach()[moved]).numel():  # the distance from the reference, over its update
            error[n] = float((ours[n][moved] - r).norm() / ((r - start[n][moved]).norm() + 1e-6 * r.numel() ** 0.5))
    off = {n: e for n, e in error.items() if isinstance(e, str) or not e <= 1e-3}  # name: its distance
    print(f"reproduced: weights off the reference's: {off}" if off else f"not reproduced: the weights agree: {error}")
    sys.exit(1 if off else 0)
