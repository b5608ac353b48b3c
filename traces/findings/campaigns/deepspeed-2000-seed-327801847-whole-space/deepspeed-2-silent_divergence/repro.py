"""DeepSpeed ZeRO-3 trains without an error, but its loss differs from plain PyTorch's
torch 2.15.0+cu132, deepspeed 0.19.8, python 3.11.2; 2 processes over gloo on CPU; found by zero3's differential fuzz.
Run: DS_ACCELERATOR=cpu /root/.cache/zero3/diff-venv/bin/python repro.py  # exit 1: it reproduces, 0: it does not, 2: it fails another way"""
import functools, os, sys, tempfile, deepspeed, torch, torch.nn as nn, torch.nn.functional as F
W, B, GAS, STEPS, SEED, ADAMW = 2, 1, 1, 1, 882299851, dict(lr=0.003, betas=(0.9, 0.95), weight_decay=0.0)
class Scale(nn.Module):  # x * scale, starting at ones
    def __init__(self, shape): super().__init__(); self.scale = nn.Parameter(torch.ones(shape))
    def forward(self, x): return (x.reshape(len(x), x.shape[1], 1) * self.scale).reshape(len(x), -1)
class RawScale(nn.Module):  # x * p, p a Parameter cached at construction (before sharding), without gradient
    def __init__(self, p): super().__init__(); self.__dict__["p"] = p
    def forward(self, x): return (x.reshape(len(x), x.shape[1], 1) * self.p.detach()).reshape(len(x), -1)
class Layers(nn.Module):  # layers held in an nn.ModuleList `layers`, applied in order: each container and the model
    def __init__(self, *layers): super().__init__(); self.layers = nn.ModuleList(layers)
    def forward(self, x): return functools.reduce(lambda x, layer: layer(x), self.layers, x)
class SumResidual(Layers):  # x + the row sums of layers(x)
    def forward(self, x): return x + (y := super().forward(x)) @ torch.ones(y.shape[-1], 1)
torch.manual_seed(SEED)  # the data: per step, GAS global batches of W*B rows; then the model's weights
DATA = [[(torch.randn(W * B, 2), torch.randn(W * B, 2)) for _ in range(GAS)] for _ in range(STEPS)]
model = Layers(SumResidual(scale := Scale([2, 1]), RawScale(scale.scale)))
CONFIG = dict(train_micro_batch_size_per_gpu=1, gradient_clipping=0.0, zero_optimization=dict(stage=3,
    stage3_param_persistence_threshold=0, stage3_prefetch_bucket_size=2, reduce_bucket_size=1,
    stage3_max_live_parameters=0, overlap_comm=False, contiguous_gradients=False))
def train(rank, results):  # rank r of W: DeepSpeed ZeRO-3 on rows r*B..(r+1)*B of each global batch
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(W))  # DeepSpeed reads them
    torch.distributed.init_process_group("gloo", init_method=f"file://{results}/store", rank=rank, world_size=W)
    adamw, losses = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], **ADAMW, foreach=False), []
    engine = deepspeed.initialize(model=model, optimizer=adamw, config=CONFIG)[0]
    for x, y in sum(DATA, []):  # each micro-step: DeepSpeed divides its loss by GAS, steps AdamW at every GAS-th
        engine.backward(loss := F.mse_loss(engine(x.chunk(W)[rank]), y.chunk(W)[rank])); engine.step()
        losses.append(loss.item())
    torch.save(losses, f"{results}/{rank}")
if __name__ == "__main__":  # each rank saves its numbers in `results`; spawn raises once a rank raised or died
    try: torch.multiprocessing.spawn(train, (results := tempfile.mkdtemp(),), nprocs=W)
    except Exception as error: sys.exit(print(error, "\nnot reproduced: it fails another way") or 2)
    ours = [sum(r) / W for r in zip(*(torch.load(f"{results}/{r}") for r in range(W)))]  # the mean over ranks
    params, losses = [p for p in model.parameters() if p.requires_grad], []
    adamw = torch.optim.AdamW(params, **ADAMW, foreach=False)
    for step in DATA:  # the reference: plain PyTorch, one process, the whole global batches
        for x, y in step:
            ((loss := F.mse_loss(model(x), y)) / GAS).backward()
            losses.append(loss.item())
        adamw.step(); adamw.zero_grad()
    print("DeepSpeed ZeRO-3 losses:", ours, "\nreference losses:", losses)
    off = [s for s, (a, b) in enumerate(zip(ours, losses)) if not abs(a - b) <= 1e-4 * abs(b)]
    print(f"reproduced: the loss is off from micro-step {off[0]}" if off else "not reproduced: the losses agree")
    sys.exit(1 if off else 0)
