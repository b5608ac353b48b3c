"""DeepSpeed ZeRO-3 raises RuntimeError: t match the broadcast shape
torch 2.15.0+cu132, deepspeed 0.19.8, python 3.11.2; 2 processes over gloo on CPU; found by zero3's differential fuzz.
Run: DS_ACCELERATOR=cpu /root/.cache/zero3/diff-venv/bin/python repro.py  # exit 1: it reproduces, 0: it does not, 2: it fails another way"""
import collections, functools, os, re, sys, tempfile, deepspeed, torch, torch.nn as nn, torch.nn.functional as F
W, B, GAS, STEPS, SEED, ADAMW = 2, 1, 1, 1, 220344898, dict(lr=0.003, betas=(0.9, 0.95), weight_decay=0.1)
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
DATA = [[(torch.randn(W * B, 1), torch.randn(W * B, 1)) for _ in range(GAS)] for _ in range(STEPS)]
model = Layers(Moe(1, 1, 1))
CONFIG = dict(train_micro_batch_size_per_gpu=1, gradient_clipping=0.0, zero_optimization=dict(stage=3,
    stage3_prefetch_bucket_size=0, reduce_bucket_size=2, stage3_max_live_parameters=7, stage3_max_reuse_distance=1,
    contiguous_gradients=False))
def train(rank, tmp):  # rank r of W: DeepSpeed ZeRO-3 on rows r*B..(r+1)*B of each global batch
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(W))  # DeepSpeed reads them
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=rank, world_size=W)
    deepspeed.utils.set_z3_leaf_modules(model, [Moe])  # each gathered whole
    adamw = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], **ADAMW, foreach=False)
    engine = deepspeed.initialize(model=model, optimizer=adamw, config=CONFIG)[0]
    for x, y in sum(DATA, []):  # each micro-step: DeepSpeed divides its loss by GAS, steps AdamW at every GAS-th
        engine.backward(F.mse_loss(engine(x.chunk(W)[rank]), y.chunk(W)[rank])); engine.step()
if __name__ == "__main__":  # spawn raises once a rank raised or died, after stopping the others
    failure = ""
    try: torch.multiprocessing.spawn(train, (tempfile.mkdtemp(),), nprocs=W)
    except Exception as error: failure = str(error)  # the rank's traceback, or the signal or exit code
    expected = {"RuntimeError: t match the broadcast shape":  # what: the regexes its traceback matches
                [r"^(\w+\.)*RuntimeError\b", r"\bt match the broadcast shape\b"]}
    print(failure or "every rank finished", f"\nexpected: {' or '.join(expected)}")
    matched = [what for what, regexes in expected.items() if all(re.search(r, failure, re.M) for r in regexes)]
    print(f"reproduced: {matched[0]}" if matched
          else f"not reproduced: {'it fails another way' if failure else 'every rank finished'}")
    sys.exit(1 if matched else 2 if failure else 0)
