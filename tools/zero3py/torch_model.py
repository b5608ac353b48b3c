"""The PyTorch twin of a zero3 model spec (core/models/MODEL_SPEC.md): the same modules, parameter
shapes, parameter names and forward math as zero3 builds, so that torch can train what zero3
trains from the same initial weights.

    model = build_model(spec, bf16=False)   # spec: a model spec dict, "kind" "gpt" or "sequential"
    loss, reported = model.loss(x, y)        # the training loss, and its value as zero3 reports it
    tensors = named_tensors(model)           # name -> parameter, under the names zero3 reads
    load_tensors_(model, tensors)            # e.g. safetensors_io.read_safetensors(an init file)

gpt: Hugging Face GPT2LMHeadModel (transformers, imported on first use), so its names are HF GPT-2's:
zero3 reads them with `--init-from FILE --names hf-gpt2` and `zero3 consolidate --names hf-gpt2`
writes them. named_tensors adds lm_head.weight, tied to transformer.wte.weight (zero3 accepts it when
equal). In bf16 the GELU is the fused tanh one (gelu_pytorch_tanh), rounding once as zero3's kernel;
in f32 GPT-2's own gelu_new. The loss is cross-entropy of the logits computed in f32 and reported
in the logits' dtype, as zero3's.

sequential: parameter names are zero3's own (`layers.0.weight`, `layers.2.layers.0.bias`); mirrored
layer types: linear, tied_linear (without bias), gelu, relu, layer_norm, concat and repeat. Any
other type (residual, sum_residual, scale, bias, raw_scale, unused_linear, moe) is a ValueError
naming it. Parameters may be bf16; they are used widened to f32 (zero3 computes an op with an f32
operand in f32, and a sequential model's inputs are f32). The loss is mse or cross-entropy over the
rows, reported as the double of the f32 value. `model.loss_kind` and `model.out_width` say which
loss and how many outputs.

Initialization is torch's own (seed it first); zero3's is different, so a comparison starts both
sides from one weights file.
"""
import warnings

import torch
import torch.nn.functional as F


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
    """(ModuleList, output width) of the layer specs `specs` on `width` features, the i-th named
    prefix.i as zero3 names it; `named` collects name -> module for a later tied_linear's tie_to."""
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
    """A sequential spec: `input_width` features in, its layers in order, `loss` mse or cross_entropy."""

    def __init__(self, spec):
        super().__init__()
        self.loss_kind = spec["loss"]
        self.layers, self.out_width = build_layers(spec["layers"], spec["input_width"], "layers", {})

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def loss(self, x, y):
        out = self(x)
        loss = F.mse_loss(out, y) if self.loss_kind == "mse" else F.cross_entropy(out, y.long())
        return loss, loss.item()


def make_gpt(spec, bf16):
    """GPT2LMHeadModel with a gpt spec's sizes (vocab, context, width, layers, heads) and a `loss`."""
    from transformers import GPT2Config, GPT2LMHeadModel
    # gelu_new is GPT-2's tanh GELU written as several ops; in bf16 each would round, while
    # zero3's kernel rounds once, as the fused F.gelu(approximate="tanh") does.
    config = GPT2Config(vocab_size=spec["vocab"], n_positions=spec["context"], n_embd=spec["width"],
                        n_layer=spec["layers"], n_head=spec["heads"], layer_norm_epsilon=1e-5,
                        activation_function="gelu_pytorch_tanh" if bf16 else "gelu_new",
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
    model = GPT2LMHeadModel(config).eval()  # eval: no dropout (all 0 anyway); gradients still flow

    def loss(x, y):
        logits = model(input_ids=x.long()).logits
        # HF's labels= would shift by one itself; zero3's targets are already the next tokens.
        loss = F.cross_entropy(logits.float().reshape(-1, spec["vocab"]), y.long().reshape(-1))
        return loss, loss.to(logits.dtype).item()  # zero3's loss has the logits' dtype
    model.loss = loss
    return model


def build_model(spec, bf16=False):
    """The torch model of a zero3 model spec (a dict as MODEL_SPEC.md has it; keys other than the
    ones the kind needs are ignored). bf16 picks the gpt's GELU only: the caller casts the model."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Initializing zero-element tensors is a no-op"
        if spec["kind"] == "gpt":
            return make_gpt(spec, bf16)
        if spec["kind"] == "sequential":
            return Sequential(spec)
    raise ValueError(f"model kind {spec['kind']!r} is not mirrored here")


def named_tensors(model):
    """name -> parameter, each shared tensor once, plus a gpt's tied lm_head.weight: what zero3's
    --init-from reads (a gpt's under --names hf-gpt2)."""
    tensors = dict(model.named_parameters())
    if hasattr(model, "lm_head"):
        tensors["lm_head.weight"] = model.lm_head.weight  # tied: zero3 must accept it equal to wte
    return tensors


def load_tensors_(model, tensors):
    """Copies name -> tensor (f32, as safetensors_io reads them) into the model's parameters, each
    cast to the parameter's dtype. The names must be model.named_parameters()'s, no more and no
    fewer, with the same shapes, but for a gpt's lm_head.weight: optional (zero3 consolidate leaves
    it out), and equal to the embedding it is tied to when there."""
    params = dict(model.named_parameters())
    names = set(tensors) - ({"lm_head.weight"} if hasattr(model, "lm_head") else set())
    if set(params) != names:
        raise ValueError(f"tensor names differ: the model only {sorted(set(params) - names)}, "
                         f"the tensors only {sorted(names - set(params))}")
    for name in names:
        if tuple(tensors[name].shape) != tuple(params[name].shape):
            raise ValueError(f"{name}: shape {tuple(tensors[name].shape)}, the model's {tuple(params[name].shape)}")
    if "lm_head.weight" in tensors and not torch.equal(tensors["lm_head.weight"], tensors["transformer.wte.weight"]):
        raise ValueError("lm_head.weight differs from transformer.wte.weight, which it is tied to")
    with torch.no_grad():
        for name, param in params.items():
            param.copy_(tensors[name].to(param.dtype))
