"""The oracle's torch models: a built-in's spec as this oracle mirrors it (settings.SEQUENTIAL,
settings.GPT), built by zero3py.torch_model from torch's seeded init and then perturbed; and the
check that the spec zero3 trained is the one mirrored."""
import json

import torch

from zero3py.oracle.settings import GPT, INPUT_WIDTH, SEED, SEQUENTIAL
from zero3py.torch_model import build_model


def model_spec(name):
    """The zero3 model spec of built-in `name` as mirrored here."""
    if name == "gpt-tiny":
        return {"zero3_model_spec": 1, "name": name, "kind": "gpt", **GPT}
    features = {} if "vocab" in SEQUENTIAL[name] else {"input_width": INPUT_WIDTH}
    return {"zero3_model_spec": 1, "name": name, "kind": "sequential", **features, **SEQUENTIAL[name]}


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
            if layer["type"] == "causal_self_attention":
                layer.setdefault("bias", True)
                layer.setdefault("proj_bias", True)
            if "layers" in layer:
                layer["layers"] = resolved(layer["layers"])
            out.append(layer)
        return out
    spec = json.loads(metadata["zero3_model_spec"])
    if name == "gpt-tiny":
        ours, theirs = GPT, {k: spec.get(k) for k in GPT}
    else:
        ours = {**model_spec(name), "layers": resolved(SEQUENTIAL[name]["layers"])}
        ours = {k: v for k, v in ours.items() if k in ("loss", "input_width", "vocab", "context", "layers")}
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
            if name.endswith("qkv.weight"):  # a sequential attention's [3C, C]: rows q | k | v
                param[:2 * param.shape[1]] *= 10


def make_model(name, bf16):
    """Built-in `name` in torch: seeded init (settings.SEED), then perturb_."""
    torch.manual_seed(SEED)
    model = build_model(model_spec(name), bf16)
    perturb_(model)
    return model
