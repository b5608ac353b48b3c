"""DeepSpeed ZeRO-1 raises KeyError raised in scaled_global_norm (stage_1_and_2.py)
torch 2.15.0+cu132, deepspeed 0.19.8, python 3.11.2; 2 processes over gloo on CPU; found by zero3's differential fuzz.
Run: DS_ACCELERATOR=cpu /root/.cache/zero3/diff-venv/bin/python repro.py  # exit 1: it reproduces, 0: it does not, 2: it fails another way"""
import functools, os, re, sys, tempfile, deepspeed, torch, torch.nn as nn, torch.nn.functional as F
W, B, GAS, STEPS, SEED, ADAMW = 2, 1, 1, 1, 593111555, dict(lr=0.003, betas=(0.9, 0.95), weight_decay=0.0)
class RawScale(nn.Module):  # x * p, p a Parameter cached at construction (before sharding), without gradient
    def __init__(self, shape): super().__init__(); self.scale = self.__dict__["p"] = nn.Parameter(torch.ones(shape))
    def forward(self, x): return x * self.p.detach()
class Layers(nn.Module):  # layers held in an nn.ModuleList `layers`, applied in order: each container and the model
    def __init__(self, *layers): super().__init__(); self.layers = nn.ModuleList(layers)
    def forward(self, x): return functools.reduce(lambda x, layer: layer(x), self.layers, x)
torch.manual_seed(SEED)  # the data: per step, GAS global batches of W*B rows; then the model's weights
DATA = [[(torch.randn(W * B, 1), torch.randn(W * B, 1)) for _ in range(GAS)] for _ in range(STEPS)]
model = Layers(RawScale([1]))
CONFIG = dict(train_micro_batch_size_per_gpu=1, gradient_clipping=0.0, zero_optimization=dict(stage=1,
    reduce_bucket_size=1, contiguous_gradients=False))
def train(rank, tmp):  # rank r of W: DeepSpeed ZeRO-1 on rows r*B..(r+1)*B of each global batch
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(W))  # DeepSpeed reads them
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=rank, world_size=W)
    adamw = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], **ADAMW, foreach=False)
    engine = deepspeed.initialize(model=model, optimizer=adamw, config=CONFIG)[0]
    for x, y in sum(DATA, []):  # each micro-step: DeepSpeed divides its loss by GAS, steps AdamW at every GAS-th
        F.mse_loss(engine(x.chunk(W)[rank]), y.chunk(W)[rank])  # no backward: no trainable parameter reaches the loss
        engine.step()
if __name__ == "__main__":  # spawn raises once a rank raised or died, after stopping the others
    failure = ""
    try: torch.multiprocessing.spawn(train, (tempfile.mkdtemp(),), nprocs=W)
    except Exception as error: failure = str(error)  # the rank's traceback, or the signal or exit code
    expected = {"KeyError raised in scaled_global_norm (stage_1_and_2.py)":  # what: the regexes its traceback matches
                [r"^(\w+\.)*KeyError\b", r'stage_1_and_2\.py", line \d+, in scaled_global_norm(?!\w)']}
    print(failure or "every rank finished", f"\nexpected: {' or '.join(expected)}")
    matched = [what for what, regexes in expected.items() if all(re.search(r, failure, re.M) for r in regexes)]
    print(f"reproduced: {matched[0]}" if matched
          else f"not reproduced: {'it fails another way' if failure else 'every rank finished'}")
    sys.exit(1 if matched else 2 if failure else 0)
