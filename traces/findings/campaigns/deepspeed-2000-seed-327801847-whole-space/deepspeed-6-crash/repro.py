"""DeepSpeed ZeRO-1 raises IndexError: list index out of range
torch 2.15.0+cu132, deepspeed 0.19.8, python 3.11.2; 1 process over gloo on CPU; found by zero3's differential fuzz.
Run: DS_ACCELERATOR=cpu /root/.cache/zero3/diff-venv/bin/python repro.py  # exit 1: it reproduces, 0: it does not, 2: it fails another way"""
import functools, os, re, sys, tempfile, deepspeed, torch, torch.nn as nn, torch.nn.functional as F
W, B, GAS, STEPS, T, SEED, ADAMW = 1, 1, 1, 1, 1, 900536482, dict(lr=0.003, betas=(0.9, 0.95), weight_decay=0.1)
class Layers(nn.Module):  # layers held in an nn.ModuleList `layers`, applied in order: each container and the model
    def __init__(self, *layers): super().__init__(); self.layers = nn.ModuleList(layers)
    def forward(self, x): return functools.reduce(lambda x, layer: layer(x), self.layers, x)
torch.manual_seed(SEED)  # the data: per step, GAS global batches of W*B sequences; then the model's weights
DATA = [[(s[:, :-1], s[:, 1:]) for s in torch.randint(2, (GAS, W * B, T + 1))] for _ in range(STEPS)]
model = Layers(nn.Embedding(2, 0), nn.Linear(0, 2, bias=False))
CONFIG = dict(train_micro_batch_size_per_gpu=1, gradient_clipping=0.0, zero_optimization=dict(stage=1,
    reduce_bucket_size=1, overlap_comm=True, contiguous_gradients=False))
def train(rank, tmp):  # rank r of W: DeepSpeed ZeRO-1 on rows r*B..(r+1)*B of each global batch
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(W))  # DeepSpeed reads them
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=rank, world_size=W)
    adamw = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], **ADAMW, foreach=False)
    engine = deepspeed.initialize(model=model, optimizer=adamw, config=CONFIG)[0]
    for x, y in sum(DATA, []):  # each micro-step: DeepSpeed divides its loss by GAS, steps AdamW at every GAS-th
        engine.backward(F.cross_entropy(engine(x.chunk(W)[rank].flatten()), y.chunk(W)[rank].flatten()))
        engine.step()
if __name__ == "__main__":  # spawn raises once a rank raised or died, after stopping the others
    failure = ""
    try: torch.multiprocessing.spawn(train, (tempfile.mkdtemp(),), nprocs=W)
    except Exception as error: failure = str(error)  # the rank's traceback, or the signal or exit code
    expected = {"IndexError: list index out of range": [r"^(\w+\.)*IndexError\b", r"\blist index out of range\b"]}
    print(failure or "every rank finished", f"\nexpected: {' or '.join(expected)}")
    matched = [what for what, regexes in expected.items() if all(re.search(r, failure, re.M) for r in regexes)]
    print(f"reproduced: {matched[0]}" if matched
          else f"not reproduced: {'it fails another way' if failure else 'every rank finished'}")
    sys.exit(1 if matched else 2 if failure else 0)
