"""DeepSpeed ZeRO-1 fails: a rank killed by SIGABRT
torch 2.15.0+cu132, deepspeed 0.19.8, python 3.11.2; 2 processes over gloo on CPU; found by zero3's differential fuzz.
Run: DS_ACCELERATOR=cpu /root/.cache/zero3/diff-venv/bin/python repro.py  # exit 1: it reproduces, 0: it does not, 2: it fails another way"""
import collections, os, re, sys, tempfile, deepspeed, torch, torch.nn as nn, torch.nn.functional as F
W, B, GAS, STEPS, T, SEED, ADAMW = 2, 2, 1, 4, 1, 898462372, dict(lr=0.003, betas=(0.9, 0.95), weight_decay=0.0)
def broadcast(x, p, shape, op):  # p [n] meets x [B, w]; p [n, 1] meets x viewed as [B, w, 1]
    return op(x, p) if len(shape) == 1 else op(x.reshape(len(x), x.shape[1], 1), p).reshape(len(x), -1)
class TiedLinear(nn.Module):  # x @ W.T; W: an earlier layer's weight, registered there only
    def __init__(self, owner): super().__init__(); self.__dict__["owner"] = owner
    def forward(self, x): return F.linear(x, self.owner.weight)
class Scale(nn.Module):  # x * scale, starting at ones
    def __init__(self, shape): super().__init__(); self.scale = nn.Parameter(torch.ones(shape))
    def forward(self, x): return broadcast(x, self.scale, self.scale.shape, torch.mul)
class RawScale(nn.Module):  # x * p, p read from its owner by the parent, handed in, without gradient
    def __init__(self, owner=None, name="scale", shape=None):  # owner: a plain attribute, not a submodule
        super().__init__(); self.scale = nn.Parameter(torch.ones(shape)) if owner is None else None
        self.__dict__["owner"], self.name, self.shape = owner or self, name, shape or getattr(owner, name).shape
    def forward(self, x, p): return broadcast(x, p.detach(), self.shape, torch.mul)
class Moe(nn.Module):  # top-1 routing: a row goes to its argmax expert, scaled by that expert's probability
    def __init__(self, w, n, h): super().__init__(); self.gate, self.experts = nn.Linear(w, n), nn.ModuleList(
            nn.Sequential(collections.OrderedDict(fc=nn.Linear(w, h), gelu=nn.GELU("tanh"), proj=nn.Linear(h, w)))
            for _ in range(n))  # n experts, each fc (w -> h), tanh GELU, proj (h -> w)
    def forward(self, x):  # only the experts some row chose run: ranks may run different experts
        probs, choice, out = torch.softmax(logits := self.gate(x), -1), logits.argmax(-1), torch.zeros_like(x)
        for e in choice.unique().tolist(): out[m] = self.experts[e](x[m := choice == e]) * probs[m, e:e + 1]
        return out
class CausalSelfAttention(nn.Module):  # multi-head causal attention within each sequence of T rows
    def __init__(self, heads, qkv, proj): super().__init__(); self.heads, self.qkv, self.proj = heads, qkv, proj
    def forward(self, x): return self.proj(F.scaled_dot_product_attention(*self.qkv(x).reshape(len(x) // T, T, 3,
        self.heads, -1).permute(2, 0, 3, 1, 4), is_causal=True).transpose(1, 2).reshape(x.shape))
class SwiGLU(nn.Module):  # down(silu(gate(x)) * up(x)), LLaMA's feed-forward (no residual)
    def __init__(self, w, h, b=False):  # gate and up w -> h, down h -> w; b: their biases
        super().__init__(); self.gate, self.up, self.down = nn.Linear(w, h, b), nn.Linear(w, h, b), nn.Linear(h, w, b)
    def forward(self, x): return self.down(F.silu(self.gate(x)) * self.up(x))
class Layers(nn.Module):  # layers held in an nn.ModuleList `layers`, applied in order: each container and the model
    def __init__(self, *layers): super().__init__(); self.layers = nn.ModuleList(layers)
    def forward(self, x):  # a RawScale gets its parameter from here, its parent
        for layer in self.layers:
            x = layer(x, getattr(layer.owner, layer.name)) if isinstance(layer, RawScale) else layer(x)
        return x
class Residual(Layers):  # x + layers(x)
    def forward(self, x): return x + super().forward(x)
class SumResidual(Layers):  # x + the row sums of layers(x)
    def forward(self, x): return x + (y := super().forward(x)) @ torch.ones(y.shape[-1], 1)
torch.manual_seed(SEED)  # the data: per step, GAS global batches of W*B sequences; then the model's weights
DATA = [[(s[:, :-1], s[:, 1:]) for s in torch.randint(14, (GAS, W * B, T + 1))] for _ in range(STEPS)]
model = Layers(nn.Embedding(14, 1),
               Residual(nn.LayerNorm(1),
                        attention := CausalSelfAttention(1, nn.Linear(1, 3, bias=False), nn.Linear(1, 1))),
               Residual(nn.LayerNorm(1), nn.Linear(1, 0), nn.GELU(approximate="tanh"), nn.Linear(0, 1)),
               TiedLinear(attention.qkv),
               SumResidual(Scale([3, 1]).requires_grad_(False), RawScale(shape=[1]),
                           RawScale(attention.proj, 'weight')),
               SumResidual(SumResidual(SwiGLU(3, 0, b=True), Moe(3, 1, 3), RawScale(attention.proj, 'weight')),
                           Scale([3]).requires_grad_(False), Moe(3, 2, 3)), nn.Linear(3, 14))
CONFIG = dict(train_micro_batch_size_per_gpu=2, gradient_clipping=0.0, zero_force_ds_cpu_optimizer=False,
    zero_optimization=dict(stage=1, reduce_bucket_size=9, contiguous_gradients=False,
    offload_optimizer=dict(device="cpu", pin_memory=False)))
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
    expected = {"SIGABRT": [r"\bsignal SIGABRT\b"],  # what: the regexes its traceback matches
                "RuntimeError: This is typically caused by a remote worker":
                [r"^(\w+\.)*RuntimeError\b", r"\bThis is typically caused by a remote worker\b"]}
    print(failure or "every rank finished", f"\nexpected: {' or '.join(expected)}")
    matched = [what for what, regexes in expected.items() if all(re.search(r, failure, re.M) for r in regexes)]
    print(f"reproduced: {matched[0]}" if matched
          else f"not reproduced: {'it fails another way' if failure else 'every rank finished'}")
    sys.exit(1 if matched else 2 if failure else 0)
