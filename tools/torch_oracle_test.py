#!/usr/bin/env python3
"""The outside oracle: the same model, initial weights and data trained in PyTorch (torch.nn,
torch.optim.AdamW; Hugging Face GPT2LMHeadModel for gpt-tiny) and by `zero3 train`, compared step
by step (losses, gradient norms) and at the end (every f32 master weight).

    /usr/bin/python3 tools/torch_oracle_test.py build/tools/zero3 [--models gpt-tiny,mlp-tiny] [--dtypes f32]
    /usr/bin/python3 tools/torch_oracle_test.py --torch-only    # no zero3: the torch side and the file formats

Debian's interpreter has python3-torch; gpt-tiny also needs `transformers`, which
tools/lib/oracle_venv.sh installs into a venv over the system packages (this script re-executes
itself under that venv's python when transformers is missing). Per model and dtype:
`zero3 train --backend ref --ranks 4` (the global batch of 4 ranks in one process) and
`--backend sim --ranks 4 --zero 3` with every parameter sharded (persistence threshold 0), both
--init-from the torch model's initial weights (gpt: under HF GPT-2's names, --names hf-gpt2), on
the same data: for gpt an llm.c token file read here as llm.c's DataLoader reads it (and checked
against `zero3 inspect --dump-data`), for the sequential models the teacher batches that dump writes.

What the torch side mirrors (zero3 source in brackets):
  * AdamW = torch.optim.AdamW (single-tensor), one group, weight decay on EVERY parameter
    [core/training/optimizer.cc adamw_coefficients, core/tensor/cpu_kernels_elementwise.cc adamw];
    hyperparameters as the f32 values zero3 holds [core/training/train_config.h AdamWHyper].
  * gradients: per micro-step each rank's gradient widened to f32, summed over ranks in rank order,
    x f32(1/W), added to an f32 accumulator; after the last micro-step x f32(1/GAS)
    [optimizer.cc accumulate_average, finish_accumulation]. Loss: the mean over the micro-batch's
    rows (all B*T positions for gpt); a step's loss is the double mean of its micro-step losses
    (sim: each rank's mean rounded to f32, summed in f32, / W) [replicated_trainer.cc mean_loss,
    core/zero3/zero3_step.cc].
  * clipping: per rank the squares of its shard of every gradient summed in double and rounded to
    f32, partials added in f32, sqrt; clip = max / (norm + 1e-6) only when norm > max
    [replicated_trainer.cc global_grad_norm, optimizer.cc clip_coefficient].
  * bf16: f32 masters, cast to bf16 compute copies before each step; every op rounds its output to
    bf16, but an op with any f32 operand computes in f32 [core/autograd/ops.cc promote]. So gpt is
    bf16 end to end (the loss value too), while the sequential models, fed f32 inputs, compute in
    f32 on bf16-rounded weights and get bf16-rounded weight gradients. Torch does the same: HF
    GPT-2 in bf16 (cross-entropy of the bf16 logits computed in f32, its value rounded to bf16, as
    zero3's kernel does), the sequential layers' bf16 parameters used through .float().

Tolerances (TOLERANCE; measured on this model set, seed 7, 20 steps). Both sides round differently
(BLAS vs ATen summation order; zero3 accumulates layer norm, softmax and cross-entropy in double),
so the script also prints torch's own spread when only the row order of every batch is permuted.
f32: loss <= 1e-5 relative, grad norm <= 1e-4; final weights: ||zero3 - torch|| <= 1e-3 of the
tensor's update ||torch - initial||. Seen: losses ~1e-7, weights <= 1e-5 of the update; a 1% lr
change, no weight decay, no clipping or beta2 0.999 each fail by steps 1-9, and swapping q and k
or two heads in the init file fails step 0 (perturb_ makes attention far from uniform). bf16, sequential
(bf16 weights, f32 activations): loss 1e-5, grad norm 1e-3, weights 1e-2; seen: <= 1e-5 of the
update. bf16, gpt: both round every activation to 8 bits, not at identical points (HF's addmm,
the attention mask, ATen's bf16 kernels), so the runs part at bf16 resolution: loss 1e-2 (about
one bf16 ulp of the loss), grad norm 5e-2, weights 0.3 of the update; seen: 6e-4, 2e-2, 0.12,
with torch's own permuted-rows spread at 0.12 as well. That is a coarse check: it does not see a
1% lr change. The key third of each c_attn bias is never compared: its gradient is zero in exact
arithmetic (softmax ignores a per-row constant), so both Adams normalize rounding noise into
steps of about lr in random directions; it changes no output.

Exit 0 when everything matches, 1 otherwise; the last line says which.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Where tools/lib/oracle_venv.sh installs transformers (its ZERO3_ORACLE_VENV).
VENV = os.environ.get("ZERO3_ORACLE_VENV", os.path.join(ROOT, "build", "oracle-venv"))
VENV_PYTHON = os.path.join(VENV, "bin", "python")

STEPS, GAS, MICRO, WORLD, SEED = 20, 2, 4, 4, 7
# What the runs are configured with (a ds_config.json); every value is used as its f32 rounding.
CONFIG = {"gradient_clipping": 1.0,
          "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "betas": [0.9, 0.95], "eps": 1e-8,
                                                    "weight_decay": 0.1}},
          "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}}
# Relative loss and gradient-norm differences per step, and final weights' difference as a fraction
# of the training update (weight_errors); the module docstring says where each number comes from.
TOLERANCE = {"f32": {"loss": 1e-5, "grad_norm": 1e-4, "weights": 1e-3},
             "bf16": {"loss": 1e-2, "grad_norm": 5e-2, "weights": 0.3},           # gpt: bf16 activations
             "bf16-weights": {"loss": 1e-5, "grad_norm": 1e-3, "weights": 1e-2}}  # sequential: f32 activations

# The built-in sequential models, copied from core/models/model_zoo.cc (keep in sync).
SEQUENTIAL = {
    "mlp-tiny": {"loss": "mse", "layers": [
        {"type": "linear", "out": 32}, {"type": "gelu"}, {"type": "linear", "out": 32}, {"type": "gelu"},
        {"type": "linear", "out": 4}]},
    "classifier-tiny": {"loss": "cross_entropy", "layers": [
        {"type": "linear", "out": 32}, {"type": "relu"}, {"type": "layer_norm"}, {"type": "linear", "out": 5}]},
    "zero-sized": {"loss": "mse", "layers": [
        {"type": "concat", "layers": [{"type": "linear", "out": 0}]},
        {"type": "linear", "out": 16}, {"type": "gelu"}, {"type": "linear", "out": 4}]},
    "repeat-tiny": {"loss": "mse", "layers": [
        {"type": "linear", "out": 16}, {"type": "gelu"},
        {"type": "repeat", "times": 3, "layers": [{"type": "linear", "out": 16}, {"type": "gelu"}]},
        {"type": "linear", "out": 4}]},
    "tied-tiny": {"loss": "mse", "layers": [
        {"type": "linear", "out": 16}, {"type": "gelu"},
        {"type": "tied_linear", "tie_to": "layers.0", "transpose": True}, {"type": "linear", "out": 4}]},
}
INPUT_WIDTH = 8
GPT = {"vocab": 64, "context": 16, "layers": 2, "heads": 2, "width": 32}  # gpt-tiny
MODELS = ["gpt-tiny"] + list(SEQUENTIAL)


def f32(value):
    return float(np.float32(value))


# ---- safetensors, written and read by hand (8-byte LE header length, JSON header, LE bytes) ----

def write_safetensors(path, tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, tensor in tensors.items():
        data = tensor.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensor.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the buffer starts 8-byte aligned, as the format recommends
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path, metadata=None):
    """name -> f32 tensor (F32 as is, BF16 widened exactly); the header's __metadata__ into
    `metadata` (a dict) when given."""
    with open(path, "rb") as file:
        data = file.read()
    (length,) = struct.unpack_from("<Q", data)
    header = json.loads(data[8:8 + length])
    buffer = data[8 + length:]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            if metadata is not None:
                metadata.update(entry)
            continue
        begin, end = entry["data_offsets"]
        if entry["dtype"] == "F32":
            values = np.frombuffer(buffer[begin:end], "<f4")
        elif entry["dtype"] == "BF16":
            values = (np.frombuffer(buffer[begin:end], "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{path}: {name} has dtype {entry['dtype']}")
        out[name] = torch.from_numpy(values.astype(np.float32)).reshape(entry["shape"])
    return out


# ---- llm.c token files and its DataLoader's batches (core/models/token_file_data.h) ----

def write_token_file(path, tokens):
    header = np.zeros(256, "<i4")
    header[:3] = [20240520, 1, len(tokens)]
    with open(path, "wb") as out:
        out.write(header.tobytes() + np.asarray(tokens, "<u2").tobytes())


def read_token_file(path):
    with open(path, "rb") as file:
        header = np.frombuffer(file.read(1024), "<i4")
        assert header[0] == 20240520 and header[1] == 1, f"{path}: not an llm.c token file"
        return np.frombuffer(file.read(), "<u2")[:header[2]].astype(np.int64)


def llmc_global_batch(tokens, g, rows_per_rank, context, world):
    """Micro-step g's W ranks' batches stacked in rank order: rank r's window of B*T + 1 tokens
    starts at (g mod E) * W*B*T + r*B*T, so the W windows tile one window of W*B*T + 1 tokens."""
    span = rows_per_rank * context * world
    start = (g % ((len(tokens) - 1) // span)) * span
    window = torch.from_numpy(tokens[start:start + span + 1].copy())
    return window[:-1].reshape(-1, context), window[1:].reshape(-1, context)


# ---- models ----

class Linear(torch.nn.Linear):
    """zero3's Linear [out, in]; a bf16 parameter is used widened, as zero3's f32-input ops use it."""

    def forward(self, x):
        return F.linear(x, self.weight.float(), None if self.bias is None else self.bias.float())


class LayerNorm(torch.nn.LayerNorm):
    def forward(self, x):  # eps 1e-5 as core/nn/layer_norm.h
        return F.layer_norm(x, self.normalized_shape, self.weight.float(), self.bias.float(), self.eps)


class Act(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, x):  # zero3's GELU is the tanh approximation (cpu_kernels_elementwise.cc gelu_value)
        return F.gelu(x, approximate="tanh") if self.kind == "gelu" else F.relu(x)


class Body(torch.nn.Module):
    """concat: [x, body(x)] on the last dim; repeat: body applied `times` times (same weights)."""

    def __init__(self, kind, layers, times=1):
        super().__init__()
        self.kind, self.layers, self.times = kind, layers, times

    def forward(self, x):
        y = x
        for _ in range(self.times):
            for layer in self.layers:
                y = layer(y)
        return torch.cat([x, y], -1) if self.kind == "concat" else y


class TiedLinear(torch.nn.Module):
    """F.linear over an earlier layer's weight (transposed: x @ W), owning no parameter."""

    def __init__(self, target, transpose):
        super().__init__()
        self.__dict__["target"] = target  # not a submodule: the weight stays registered once
        self.transpose = transpose

    def forward(self, x):
        weight = self.target.weight.float()
        return F.linear(x, weight.t() if self.transpose else weight)


def build_layers(specs, width, prefix, named):
    layers = torch.nn.ModuleList()
    for i, spec in enumerate(specs):
        kind, name = spec["type"], f"{prefix}.{i}"
        if kind == "linear":
            layer, out = Linear(width, spec["out"], bias=spec.get("bias", True)), spec["out"]
        elif kind in ("gelu", "relu"):
            layer, out = Act(kind), width
        elif kind == "layer_norm":
            layer, out = LayerNorm(width, eps=1e-5), width
        elif kind in ("concat", "repeat"):
            body, body_width = build_layers(spec["layers"], width, name + ".layers", named)
            layer = Body(kind, body, spec.get("times", 1))
            out = width + body_width if kind == "concat" else width
        elif kind == "tied_linear" and not spec.get("bias", False):
            target = named[spec["tie_to"]]
            layer = TiedLinear(target, spec.get("transpose", False))
            out = target.weight.shape[1 if layer.transpose else 0]
        else:
            raise ValueError(f"layer type {kind} is not mirrored here")
        named[name] = layer
        layers.append(layer)
        width = out
    return layers, width


class Sequential(torch.nn.Module):
    def __init__(self, spec):
        super().__init__()
        self.loss_kind = spec["loss"]
        self.layers, self.out_width = build_layers(spec["layers"], INPUT_WIDTH, "layers", {})

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def loss(self, x, y):
        out = self(x)
        loss = F.mse_loss(out, y) if self.loss_kind == "mse" else F.cross_entropy(out, y.long())
        return loss, loss.item()


def spec_problems(name, metadata):
    """Our copy of the model (SEQUENTIAL, GPT) against the spec zero3 trained, which
    `consolidate` records with its defaults spelled out."""
    def resolved(layers):
        out = []
        for layer in map(dict, layers):
            if layer["type"] == "linear":
                layer.setdefault("bias", True)
            if layer["type"] == "tied_linear":
                layer.setdefault("bias", False)
                layer.setdefault("transpose", False)
            if "layers" in layer:
                layer["layers"] = resolved(layer["layers"])
            out.append(layer)
        return out
    spec = json.loads(metadata["zero3_model_spec"])
    if name == "gpt-tiny":
        ours, theirs = GPT, {k: spec.get(k) for k in GPT}
    else:
        ours = {"loss": SEQUENTIAL[name]["loss"], "input_width": INPUT_WIDTH,
                "layers": resolved(SEQUENTIAL[name]["layers"])}
        theirs = {k: spec.get(k) for k in ours}
    return [] if ours == theirs else [f"zero3's {name} is {json.dumps(theirs)}; this script mirrors {json.dumps(ours)}"]


def perturb_(model):
    """Moves biases and LayerNorm gains off their 0 / 1 starts, so that a wrong layout of them
    shows; and makes GPT attention far from uniform (q, k 10x GPT-2's init), so that the step-0
    loss depends on the q/k/v split and the head layout."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.dim() == 1 and param.numel() > 0:
                param.add_(0.05 * torch.randn_like(param))
            if name.endswith("attn.c_attn.weight"):
                param[:, :2 * GPT["width"]] *= 10


def make_gpt(bf16):
    from transformers import GPT2Config, GPT2LMHeadModel
    # gelu_new is GPT-2's tanh GELU written as several ops; in bf16 each would round, while
    # zero3's kernel rounds once, as the fused F.gelu(approximate="tanh") does.
    config = GPT2Config(vocab_size=GPT["vocab"], n_positions=GPT["context"], n_embd=GPT["width"],
                        n_layer=GPT["layers"], n_head=GPT["heads"], layer_norm_epsilon=1e-5,
                        activation_function="gelu_pytorch_tanh" if bf16 else "gelu_new",
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
    model = GPT2LMHeadModel(config).eval()  # eval: no dropout (all 0 anyway); gradients still flow

    def loss(x, y):
        logits = model(input_ids=x.long()).logits
        # HF's labels= would shift by one itself; zero3's targets are already the next tokens.
        loss = F.cross_entropy(logits.float().reshape(-1, GPT["vocab"]), y.long().reshape(-1))
        return loss, loss.to(logits.dtype).item()  # zero3's loss has the logits' dtype
    model.loss = loss
    return model


def make_model(name, bf16):
    torch.manual_seed(SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Initializing zero-element tensors is a no-op"
        model = make_gpt(bf16) if name == "gpt-tiny" else Sequential(SEQUENTIAL[name])
    perturb_(model)
    return model


# ---- torch training, mirroring zero3's step ----

def grad_norm(accum, ranks):
    """zero3's canonical norm: per rank the squares of its shard of every gradient (ceil(numel/W)
    elements from r * that) summed in double and rounded to f32, the partials added in f32."""
    total = np.float32(0)
    for r in range(ranks):
        partial = 0.0
        for a in accum.values():
            size = -(-a.numel() // ranks)
            partial += float(a.reshape(-1)[r * size:(r + 1) * size].double().square().sum())
        total = np.float32(total + np.float32(partial))
    return float(np.sqrt(total))


def train_torch(model, batches, hyper, bf16, ranks=1, permute_rows=False):
    """Trains as zero3 does with `ranks` data-parallel ranks, each taking its consecutive rows of
    the global batch: 1 mirrors the single-process reference, W the sim's DDP / ZeRO-3 ranks
    (each rank's gradient rounded to the compute dtype on its own, then averaged in f32)."""
    dtype = torch.bfloat16 if bf16 else torch.float32
    masters = {n: torch.nn.Parameter(p.detach().float().clone()) for n, p in model.named_parameters()}
    model.to(dtype)
    params = dict(model.named_parameters())  # a tied weight once
    optimizer = torch.optim.AdamW(masters.values(), lr=hyper["lr"], betas=hyper["betas"], eps=hyper["eps"],
                                  weight_decay=hyper["weight_decay"], foreach=False)
    generator = torch.Generator().manual_seed(1)
    losses, norms = [], []
    for step in range(STEPS):
        with torch.no_grad():
            for n, p in params.items():
                p.copy_(masters[n])  # the compute copy (rounded to bf16)
        accum = {n: torch.zeros_like(m) for n, m in masters.items()}
        rank_losses = [[] for _ in range(ranks)]
        for micro in range(GAS):
            x, y = batches[step][micro]
            if permute_rows:  # the same math summed in another order: the rounding-noise twin
                order = torch.randperm(x.shape[0], generator=generator)
                x, y = x[order], y[order]
            summed = {n: torch.zeros_like(m) for n, m in masters.items()}
            rows = x.shape[0] // ranks
            for r in range(ranks):
                model.zero_grad(set_to_none=True)
                loss, reported = model.loss(x[r * rows:(r + 1) * rows], y[r * rows:(r + 1) * rows])
                loss.backward()
                rank_losses[r].append(reported)
                for n, p in params.items():
                    if p.grad is not None:  # widened to f32, summed in rank order (the all-reduce)
                        summed[n] += p.grad.float()
            for n in accum:
                accum[n] += summed[n] * f32(1.0 / ranks)
        if GAS != 1:
            for a in accum.values():
                a.mul_(f32(1.0 / GAS))
        norm = grad_norm(accum, ranks)
        max_norm = hyper["gradient_clipping"]
        clip = 1.0
        if max_norm > 0 and norm > max_norm:
            clip = f32(np.float32(max_norm) / (np.float32(norm) + np.float32(1e-6)))
        for n, m in masters.items():
            m.grad = accum[n] if clip == 1.0 else accum[n] * clip
        optimizer.step()
        if ranks == 1:  # the reference: the double mean of its micro-step losses
            losses.append(sum(rank_losses[0]) / GAS)
        else:  # each rank's mean in f32, summed over ranks in f32, / W
            total = np.float32(0)
            for micro_losses in rank_losses:
                total = np.float32(total + np.float32(sum(micro_losses) / GAS))
            losses.append(float(total) / ranks)
        norms.append(norm)
    return losses, norms, {n: m.detach() for n, m in masters.items()}


# ---- zero3 ----

def zero3(binary, *args):
    result = subprocess.run([binary, *map(str, args)], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"zero3 {' '.join(map(str, args))}: exit {result.returncode}\n"
                           f"{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return result.stdout


def hyperparameters(config):
    params = config["optimizer"]["params"]
    return {"lr": f32(params["lr"]), "betas": tuple(f32(b) for b in params["betas"]), "eps": f32(params["eps"]),
            "weight_decay": f32(params["weight_decay"]), "gradient_clipping": f32(config["gradient_clipping"])}


def check_report(report, backend, hyper, bf16):
    """The run used the settings the torch side mirrors; the sim run really sharded parameters."""
    cfg = report["config"]
    seen = {"micro": cfg["train_micro_batch_size_per_gpu"], "gas": cfg["gradient_accumulation_steps"],
            "bf16": cfg["bf16"]["enabled"], **hyperparameters(cfg)}
    wanted = {"micro": MICRO, "gas": GAS, "bf16": bf16, **hyper}
    if backend == "sim":
        zero = cfg["zero_optimization"]
        seen.update(stage=zero["stage"], persistence=zero["stage3_param_persistence_threshold"],
                    gathers=report.get("collectives", {}).get("all_gather", {}).get("count", 0) > 0)
        wanted.update(stage=3, persistence=0, gathers=True)
    problems = [f"report {k} = {seen[k]}, expected {v}" for k, v in wanted.items() if seen[k] != v]
    if len(report["losses"]) != STEPS:
        problems.append(f"report has {len(report['losses'])} losses for {STEPS} steps")
    return problems


# ---- comparison ----

def compared(name, tensor):
    """The elements compared, flat: all but the key third of a c_attn bias (module docstring)."""
    flat = tensor.reshape(-1).clone()
    if name.endswith("attn.c_attn.bias"):
        flat[GPT["width"]:2 * GPT["width"]] = 0
    return flat


def weight_errors(ours, theirs, initial):
    """name -> ||zero3 - torch|| / (||torch - initial|| + 1e-6 sqrt(numel)): the difference as a
    fraction of how far training moved the tensor; or a string when the two cannot be compared."""
    if set(ours) != set(theirs):
        return (f"tensor names differ: torch only {sorted(set(ours) - set(theirs))}, "
                f"zero3 only {sorted(set(theirs) - set(ours))}")
    errors = {}
    for name, mine in ours.items():
        if tuple(mine.shape) != tuple(theirs[name].shape):
            return f"{name}: zero3 shape {tuple(theirs[name].shape)}, torch {tuple(mine.shape)}"
        if mine.numel():
            mine_flat, start = compared(name, mine), compared(name, initial[name])
            moved = float((mine_flat - start).norm()) + 1e-6 * mine.numel() ** 0.5
            errors[name] = float((compared(name, theirs[name]) - mine_flat).norm()) / moved
    return errors


def relative(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def prepare(name, bf16, work, binary):
    """Initial weights file, zero3 --init-from flags, and per step the GAS global batches."""
    model = make_model(name, bf16)
    init = os.path.join(work, "init.safetensors")
    tensors = {n: p for n, p in model.named_parameters()}
    flags = ["--init-from", init]
    if name == "gpt-tiny":
        tensors["lm_head.weight"] = model.lm_head.weight  # tied: zero3 must accept it equal to wte
        flags += ["--names", "hf-gpt2"]
        rng = np.random.default_rng(SEED)
        span = WORLD * MICRO * GPT["context"]
        tokens = np.zeros(7 * span + 1 + 37, np.int64)  # 7 windows: 40 micro-steps wrap the epoch
        for i in range(1, len(tokens)):  # a learnable chain, so the loss actually moves
            tokens[i] = (5 * tokens[i - 1] + rng.integers(0, 4)) % GPT["vocab"]
        path = os.path.join(work, "tokens.bin")
        write_token_file(path, tokens)
        flags += ["--data", path]
        read = read_token_file(path)
        batches = [[llmc_global_batch(read, s * GAS + m, MICRO, GPT["context"], WORLD) for m in range(GAS)]
                   for s in range(STEPS)]
    elif binary:
        dump = os.path.join(work, "data.safetensors")
        zero3(binary, "inspect", name, "--seed", SEED, "--dump-data", dump, "--steps", STEPS, "--gas", GAS,
              "--micro-batch", MICRO, "--ranks", WORLD)
        data = read_safetensors(dump)
        batches = [[(data[f"step{s}.micro{m}.inputs"], data[f"step{s}.micro{m}.targets"]) for m in range(GAS)]
                   for s in range(STEPS)]
    else:  # --torch-only: any data of the right shapes
        gen = torch.Generator().manual_seed(SEED)
        rows = WORLD * MICRO
        target = (lambda: torch.randint(0, model.out_width, (rows,), generator=gen).float()) \
            if model.loss_kind == "cross_entropy" else (lambda: torch.randn(rows, model.out_width, generator=gen))
        batches = [[(torch.randn(rows, INPUT_WIDTH, generator=gen), target()) for _ in range(GAS)]
                   for _ in range(STEPS)]
    write_safetensors(init, tensors, {"format": "pt"})
    return model, flags, batches


def check_dumped_tokens(binary, work, flags, batches):
    """zero3's own batches of the token file (inspect --dump-data) equal our llm.c reading."""
    dump = os.path.join(work, "token-batches.safetensors")
    zero3(binary, "inspect", "gpt-tiny", "--seed", SEED, "--dump-data", dump, "--steps", STEPS, "--gas", GAS,
          "--micro-batch", MICRO, "--ranks", WORLD, "--data", flags[flags.index("--data") + 1])
    data = read_safetensors(dump)
    for s in range(STEPS):
        for m in range(GAS):
            for what, ours in zip(("inputs", "targets"), batches[s][m]):
                if not torch.equal(data[f"step{s}.micro{m}.{what}"].long(), ours.long()):
                    return [f"token batch step {s} micro {m} {what}: zero3's differs from llm.c's DataLoader"]
    return []


def weight_summary(errors, limit):
    """(first tensor over the limit or None, the worst tensor, its error)."""
    over = [name for name, error in errors.items() if error > limit]
    worst = max(errors, key=errors.get, default=None)
    return (over[0] if over else None), worst, errors.get(worst, 0.0)


def train_zero3(binary, work, backend, name, flags, bf16):
    """One `zero3 train` run: (its report, its consolidated weights name -> f32 tensor, their
    safetensors metadata)."""
    config = os.path.join(work, "ds_config.json")
    with open(config, "w") as out:
        json.dump(CONFIG, out)
    report, checkpoint = os.path.join(work, f"{backend}.json"), os.path.join(work, f"{backend}-ck")
    weights = os.path.join(work, f"{backend}.safetensors")
    zero3(binary, "train", "--backend", backend, "--ranks", WORLD, *(["--zero", "3"] if backend == "sim" else []),
          "--model", name, "--steps", STEPS, "--seed", SEED, "--gas", GAS, "--micro-batch", MICRO,
          "--config", config, *flags, *(["--bf16"] if bf16 else []), "--log-every", STEPS,
          "--report", report, "--save-checkpoint", checkpoint)
    zero3(binary, "consolidate", checkpoint, weights, "--format", "safetensors",
          *(["--names", "hf-gpt2"] if name == "gpt-tiny" else []))
    metadata = {}
    tensors = read_safetensors(weights, metadata)
    with open(report) as file:
        return json.load(file), tensors, metadata


def check_logits(binary, work, flags, model):
    """zero3's GPT-2 is GPT-2: its logits for the initial HF weights on the first micro-batch's
    tokens (`zero3 inspect --dump-logits`) equal GPT2LMHeadModel's within 1e-5 of their scale."""
    path = os.path.join(work, "logits.safetensors")
    zero3(binary, "inspect", "gpt-tiny", "--seed", SEED, "--dump-logits", path, "--micro-batch", MICRO,
          "--ranks", WORLD, *flags)
    dumped = read_safetensors(path)
    with torch.no_grad():
        theirs = model(input_ids=dumped["inputs"].long()).logits.float()
    ours = dumped["logits"].float()
    if ours.shape != theirs.shape:
        return [f"logits: shape {tuple(ours.shape)} vs HF {tuple(theirs.shape)}"]
    difference = (ours - theirs).abs().max().item()
    scale = max(1.0, theirs.abs().max().item())
    print(f"   forward check: logits max |zero3 - HF GPT-2| {difference:.2e} (scale {scale:.2f}, tolerance 1e-5 of it)")
    return [] if difference <= 1e-5 * scale else [f"logits differ from HF GPT-2 by {difference:.2e} (scale {scale:.2f})"]


def run_case(name, bf16, binary, work):
    """Trains one model x dtype in torch and (unless binary is None) in zero3; returns failures."""
    dtype = "bf16" if bf16 else "f32"
    tol = TOLERANCE["f32" if not bf16 else "bf16" if name == "gpt-tiny" else "bf16-weights"]
    hyper = hyperparameters(CONFIG)
    model, flags, batches = prepare(name, bf16, work, binary)
    initial = {n: p.detach().float().clone() for n, p in model.named_parameters()}
    failures = []
    if name == "gpt-tiny" and binary:
        failures += check_dumped_tokens(binary, work, flags, batches)
        if not bf16:
            failures += check_logits(binary, work, flags, model)
    # The backends' torch twins: the global batch in one process (ref), and W ranks (sim).
    torch_runs = {"ref": train_torch(model, batches, hyper, bf16),
                  "sim": train_torch(make_model(name, bf16), batches, hyper, bf16, ranks=WORLD)}
    t_losses, t_norms, t_weights = torch_runs["ref"]
    # torch's own rounding noise: the same math with every batch's rows in another order.
    n_losses, n_norms, n_weights = train_torch(make_model(name, bf16), batches, hyper, bf16, permute_rows=True)
    noise = weight_summary(weight_errors(t_weights, n_weights, initial), 0)[2]
    clipped = sum(n > hyper["gradient_clipping"] for n in t_norms)
    print(f"== {name} {dtype}: torch loss {t_losses[0]:.6f} -> {t_losses[-1]:.6f}, {clipped} steps clipped; "
          f"torch's own rounding noise (rows permuted): loss {max(map(relative, n_losses, t_losses)):.1e}, "
          f"grad norm {max(map(relative, n_norms, t_norms)):.1e}, weights {noise:.1e} (tolerances {tol['loss']:g}, "
          f"{tol['grad_norm']:g}, {tol['weights']:g})")
    if not binary:
        return [f"{name} {dtype}: {f}" for f in failures]
    runs = {backend: train_zero3(binary, work, backend, name, flags, bf16) for backend in ("ref", "sim")}
    failures += spec_problems(name, runs["ref"][2])
    for backend, (report, _, _) in runs.items():
        failures += [f"{backend}: {p}" for p in check_report(report, backend, hyper, bf16)]
    if failures:
        return [f"{name} {dtype}: {f}" for f in failures]
    print("   step  torch loss   loss rel: ref     sim    grad-norm rel: ref     sim")
    for step in range(STEPS):
        cells = []
        for backend, (report, _, _) in runs.items():
            loss, norm = report["losses"][step], report["grad_norms"][step]
            t_loss, t_norm = torch_runs[backend][0][step], torch_runs[backend][1][step]
            loss_rel, norm_rel = relative(loss, t_loss), relative(norm, t_norm)
            cells.append((loss_rel, norm_rel))
            first = not any(f.startswith(backend + ": step") for f in failures)
            if first and (loss_rel > tol["loss"] or norm_rel > tol["grad_norm"]):
                failures.append(f"{backend}: step {step} is the first to differ: loss {loss!r} vs torch {t_loss!r} "
                                f"(rel {loss_rel:.1e}), grad norm {norm!r} vs torch {t_norm!r} (rel {norm_rel:.1e})")
        print(f"   {step:4d}  {t_losses[step]:10.7f}  {cells[0][0]:9.1e} {cells[1][0]:8.1e}  "
              f"{cells[0][1]:15.1e} {cells[1][1]:8.1e}")
    if name == "gpt-tiny":  # step 0's loss is a function of HF's logits for the same weights and tokens
        print(f"   forward check: step-0 loss zero3 {runs['ref'][0]['losses'][0]!r} vs HF GPT-2 {t_losses[0]!r}")
    for backend, (_, weights, _) in runs.items():
        errors = weight_errors(torch_runs[backend][2], weights, initial)
        if isinstance(errors, str):
            failures.append(f"{backend}: final weights: {errors}")
            continue
        first, worst, error = weight_summary(errors, tol["weights"])
        print(f"   {backend}: final weights differ by at most {error:.1e} of their update ({worst})")
        if first:
            failures.append(f"{backend}: final weights: {first} differs by {errors[first]:.1e} of its update "
                            f"(tolerance {tol['weights']:g}; first such tensor in parameter order)")
    return [f"{name} {dtype}: {f}" for f in failures]


def self_check_files(work):
    """Our safetensors writer/reader against the safetensors package when it is installed."""
    path = os.path.join(work, "roundtrip.safetensors")
    tensors = {"a": torch.randn(3, 4), "empty": torch.zeros(0, 8), "b": torch.randn(5)}
    write_safetensors(path, tensors, {"format": "pt"})
    back = read_safetensors(path)
    failures = [f"own safetensors round trip: {n}" for n in tensors if not torch.equal(tensors[n], back[n])]
    try:
        from safetensors.torch import load_file, save_file
    except ImportError:
        print("safetensors package not installed: own writer checked against own reader only")
        return failures
    theirs = load_file(path)
    failures += [f"safetensors package reads {n} differently" for n in tensors
                 if not torch.equal(tensors[n], theirs[n])]
    bf16 = {"w": torch.randn(4, 3).to(torch.bfloat16)}
    save_file(bf16, path)
    if not torch.equal(read_safetensors(path)["w"], bf16["w"].float()):
        failures.append("own reader widens BF16 wrongly")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("zero3", nargs="?", help="path to the zero3 binary")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of " + ",".join(MODELS))
    parser.add_argument("--dtypes", default="f32,bf16")
    parser.add_argument("--torch-only", action="store_true", help="no zero3: train the torch side, check the files")
    args = parser.parse_args()
    models = args.models.split(",")
    unknown = [m for m in models if m not in MODELS] + [d for d in args.dtypes.split(",") if d not in ("f32", "bf16")]
    if unknown or (not args.zero3 and not args.torch_only):
        parser.error(f"unknown models or dtypes {unknown}" if unknown else "give the zero3 binary or --torch-only")
    if args.zero3 and not os.access(args.zero3, os.X_OK):
        parser.error(f"{args.zero3} is not an executable (build it first: tools/test builds build/tools/zero3)")
    if "gpt-tiny" in models:
        try:
            import transformers  # noqa: F401
        except ImportError:
            if os.path.exists(VENV_PYTHON) and os.path.realpath(sys.prefix) != os.path.realpath(VENV):
                os.execv(VENV_PYTHON, [VENV_PYTHON] + sys.argv)  # the same interpreter, with the venv's packages
            sys.exit("transformers is missing: source tools/lib/oracle_venv.sh and run zero3_install_oracle_venv")
    torch.set_num_threads(1)  # determinism of ATen's reductions; the models are tiny
    failures = []
    with tempfile.TemporaryDirectory(prefix="zero3-oracle-") as work:
        failures += self_check_files(work)
        for name in models:
            for dtype in args.dtypes.split(","):
                case = os.path.join(work, f"{name}-{dtype}")
                os.makedirs(case)
                try:
                    failures += run_case(name, dtype == "bf16", None if args.torch_only else args.zero3, case)
                except (RuntimeError, KeyError, ValueError) as error:  # a failed run, or a report without a key
                    failures.append(f"{name} {dtype}: {type(error).__name__}: {error}")
    for failure in failures:
        print("FAIL", failure)
    cases = len(models) * len(args.dtypes.split(","))
    print(f"torch oracle: {'FAILED' if failures else 'passed'}: {cases} model x dtype cases, "
          f"{len(failures)} failures{' (torch side only)' if args.torch_only else ''}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
