"""DeepSpeed ZeRO-1 hangs: no rank raises, and some rank never finishes
torch 2.15.0+cu132, deepspeed 0.19.8, python 3.11.2; 2 processes over gloo on CPU; found by zero3's differential fuzz.
Run: DS_ACCELERATOR=cpu /root/.cache/zero3/diff-venv/bin/python repro.py  # exit 1: it reproduces, 0: it does not, 2: it fails another way"""
import collections, faulthandler, functools, os, signal, sys, tempfile, time, deepspeed, torch, torch.nn as nn
import torch.nn.functional as F
W, B, GAS, STEPS, T, ADAMW = 2, 1, 1, 4, 2, dict(lr=0.003, betas=(0.9, 0.95), weight_decay=0.1)
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
# The case's own data and initial weights, each float32 bit for bit: seed-drawn ones did not reproduce it
BATCHES = [[[[[2, 0], [2, 2]], [[0, 1], [2, 2]]]], [[[[1, 0], [0, 2]], [[0, 0], [2, 0]]]],
    [[[[0, 1], [2, 1]], [[1, 1], [1, 0]]]], [[[[0, 0], [0, 1]], [[0, 2], [1, 1]]]]]
DATA = [[(torch.tensor(x), torch.tensor(y)) for x, y in step] for step in BATCHES]
model = Layers(nn.Embedding(3, 1), Moe(1, 2, 1), nn.Linear(1, 3))
INIT = {"layers.0.weight": [-1.7331033, 1.9272219, 0.4274893], "layers.1.gate.weight": [0.7150196, 0.926447],
    "layers.1.gate.bias": [0.0] * 2, "layers.1.experts.0.fc.weight": [0.719795], "layers.1.experts.0.fc.bias": [0.0],
    "layers.1.experts.0.proj.weight": [-1.3241206], "layers.1.experts.0.proj.bias": [0.0],
    "layers.1.experts.1.fc.weight": [-0.5784985], "layers.1.experts.1.fc.bias": [0.0],
    "layers.1.experts.1.proj.weight": [0.22833142], "layers.1.experts.1.proj.bias": [0.0],
    "layers.2.weight": [1.9673723, -0.45068768, 1.6820335], "layers.2.bias": [0.0] * 3}
for n, v in INIT.items(): (p := model.get_parameter(n)).data.copy_(torch.tensor(v).view_as(p))  # in its shape
CONFIG = dict(train_micro_batch_size_per_gpu=1, zero_force_ds_cpu_optimizer=False, zero_optimization=dict(stage=1,
    reduce_bucket_size=1, overlap_comm=True, contiguous_gradients=False, offload_optimizer=dict(device="cpu",
    pin_memory=False)))
def train(rank, results):  # rank r of W: DeepSpeed ZeRO-1 on rows r*B..(r+1)*B of each global batch
    faulthandler.register(signal.SIGUSR1)  # prints where this rank waits when asked
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(W))  # DeepSpeed reads them
    torch.distributed.init_process_group("gloo", init_method=f"file://{results}/store", rank=rank, world_size=W)
    adamw = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], **ADAMW, foreach=False)
    engine = deepspeed.initialize(model=model, optimizer=adamw, config=CONFIG)[0]
    for x, y in sum(DATA, []):  # each micro-step: DeepSpeed divides its loss by GAS, steps AdamW at every GAS-th
        engine.backward(F.cross_entropy(engine(x.chunk(W)[rank].flatten()), y.chunk(W)[rank].flatten()))
        engine.step()
    open(f"{results}/{rank}", "w").close()  # finished: waits, in no collective, to be killed
    time.sleep(180)
if __name__ == "__main__":  # a rank that finished leaves a file in `results`, then waits
    results, failure = tempfile.mkdtemp(), ""
    ranks = torch.multiprocessing.spawn(train, (results,), nprocs=W, join=False, daemon=True)
    try: any(ranks.join(1) or all(os.path.exists(f"{results}/{r}") for r in range(W)) for _ in range(120))
    except Exception as error: failure = str(error)  # the rank's traceback, or the signal or exit code
    stuck = [r for r in range(W) if not os.path.exists(f"{results}/{r}") and ranks.processes[r].is_alive()]
    for r in stuck:  # each prints where it waits (faulthandler); the ranks, daemons, end with this process
        os.kill(ranks.processes[r].pid, signal.SIGUSR1), ranks.processes[r].join(2)
    print(failure or (f"ranks {stuck} did not finish within 120 s" if stuck else "every rank finished"))
    print(f"reproduced: a hang: ranks {stuck} did not finish within 120 s" if stuck and not failure
          else f"not reproduced: {'it fails another way' if failure else 'every rank finished'}")
    sys.exit(1 if stuck and not failure else 2 if failure else 0)
