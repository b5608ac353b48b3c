"""DeepSpeed ZeRO-1 fails: a rank killed by SIGABRT
torch 2.15.0+cu132, deepspeed 0.19.8, python 3.11.2; 2 processes over gloo on CPU; found by zero3's differential fuzz.
Run: DS_ACCELERATOR=cpu /root/.cache/zero3/diff-venv/bin/python repro.py  # exit 1: it reproduces, 0: it does not, 2: it fails another way"""
import collections, functools, os, re, sys, tempfile, deepspeed, torch, torch.nn as nn, torch.nn.functional as F
W, B, GAS, STEPS, ADAMW = 2, 2, 3, 1, dict(lr=0.003, betas=(0.9, 0.95), weight_decay=0.1)
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
BATCHES = [[[[[0.31483132, 0.0349685, -1.6948413], [-1.0762361, 0.4083782, -2.0171185],
    [0.96465063, -0.081029885, -1.2134815], [-0.33029252, 0.2371768, 1.5084407]], [2, 2, 2, 1]],
    [[[0.52440435, 1.7038287, 0.029801097], [-1.5351403, 0.9807832, -0.16291931], [0.8483721, 0.5843365, 0.92566264],
    [1.5942547, 0.47536403, 1.3668404]], [1, 0, 1, 1]], [[[0.6113284, -0.5281733, 0.016393542],
    [1.6784391, -0.5640228, 1.321308], [0.38708276, 0.57824194, 2.2385244], [0.5100468, 0.3959731, -2.3993576]],
    [2, 1, 1, 2]]]]  # per step, GAS global batches of W*B rows: inputs, targets
DATA = [[(torch.tensor(x), torch.tensor(y)) for x, y in step] for step in BATCHES]
model = Layers(Moe(3, 3, 1))
INIT = {"layers.0.gate.weight": [-1.3064667, -0.558993, -0.19140367, -0.3058657, 0.95435035, -0.32722208, 0.68594587,
    -0.54947513, -0.48009506], "layers.0.gate.bias": [0.0] * 3,
    "layers.0.experts.0.fc.weight": [-0.14774667, -0.5905483, -0.47104275], "layers.0.experts.0.fc.bias": [0.0],
    "layers.0.experts.0.proj.weight": [-0.6391842, 0.21886784, -0.9525985], "layers.0.experts.0.proj.bias": [0.0] * 3,
    "layers.0.experts.1.fc.weight": [0.038878374, 0.40289274, 0.88865405], "layers.0.experts.1.fc.bias": [0.0],
    "layers.0.experts.1.proj.weight": [-0.52677584, -0.7004047, -0.7147675],
    "layers.0.experts.1.proj.bias": [0.0] * 3, "layers.0.experts.2.fc.weight": [-0.047409154, -0.4076742, 0.42690548],
    "layers.0.experts.2.fc.bias": [0.0], "layers.0.experts.2.proj.weight": [-0.34684893, 0.86406195, 0.046577156],
    "layers.0.experts.2.proj.bias": [0.0] * 3}  # each parameter's values flattened
for n, v in INIT.items(): (p := model.get_parameter(n)).data.copy_(torch.tensor(v).view_as(p))  # in its shape
CONFIG = dict(train_micro_batch_size_per_gpu=2, gradient_accumulation_steps=3, gradient_clipping=0.0,
    zero_optimization=dict(stage=1, reduce_bucket_size=3, overlap_comm=True, contiguous_gradients=False))
def train(rank, tmp):  # rank r of W: DeepSpeed ZeRO-1 on rows r*B..(r+1)*B of each global batch
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(W))  # DeepSpeed reads them
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=rank, world_size=W)
    adamw = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], **ADAMW, foreach=False)
    engine = deepspeed.initialize(model=model, optimizer=adamw, config=CONFIG)[0]
    for x, y in sum(DATA, []):  # each micro-step: DeepSpeed divides its loss by GAS, steps AdamW at every GAS-th
        engine.backward(F.cross_entropy(engine(x.chunk(W)[rank]), y.chunk(W)[rank])); engine.step()
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
