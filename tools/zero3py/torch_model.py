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

sequential: parameter names are zero3's own (`layers.0.weight`, `layers.2.layers.0.bias`,
`layers.4.experts.1.fc.weight`, a swiglu's `layers.5.gate.weight`); every layer type of MODEL_SPEC.md
is mirrored (torch_layers.py, one module per type, forward math as core/nn/*.cc), and a layer's
`"requires_grad": false` freezes the parameters it owns (a tied_linear's bias only; a moe's gate
and experts; a swiglu's gate, up and down). The loss is mse or cross-entropy over the rows,
reported as the double of the f32 value. `model.loss_kind` and `model.out_width` say which loss
and how many outputs.

A raw_scale reads its parameter outside the framework's view (zero3's raw handle, a constant
without gradient). Under a sharding framework, how the torch code reaches that parameter decides
what it sees, so build_model takes `raw_access` (torch_layers.RAW_ACCESS): "cached_reference" (the
default: the Parameter object kept at construction, before the framework shards the model: the
broadcast trap of DeepSpeed issue #930's class), "own_forward", "parent_attribute" or
"external_parameter" (the layer and parameter are listed in `model.external_parameters` for the
framework to register); and `raw_gradient` (default False, zero3's semantics): True lets the
gradient flow through that read, as user code that forgot to detach does.

Initialization is torch's own (seed it first); zero3's is different, so a comparison starts both
sides from one weights file.
"""
import warnings

import torch
import torch.nn.functional as F

from zero3py.torch_layers import (Act, Bias, Body, CausalSelfAttention, LayerNorm, Linear, Moe, RMSNorm, Scale, SwiGLU,
                                  TiedLinear, TokenEmbedding, UnusedLinear, make_raw_scale, run_layers)


def build_layer(spec, width, name, context):
    """(module, output width) of one layer spec on `width` features, named `name` as zero3 names it."""
    kind = spec["type"]
    if kind in ("linear", "unused_linear"):
        make = Linear if kind == "linear" else UnusedLinear
        return make(width, spec["out"], bias=spec.get("bias", True)), spec["out"] if kind == "linear" else width
    if kind in ("gelu", "relu"):
        return Act(kind), width
    if kind == "layer_norm":
        return LayerNorm(width, eps=1e-5), width
    if kind == "rms_norm":
        return RMSNorm(width, eps=1e-5), width
    if kind == "swiglu":
        return SwiGLU(width, spec["hidden"], spec.get("bias", False)), width
    if kind in ("concat", "repeat", "residual", "sum_residual"):
        body, body_width = build_layers(spec["layers"], width, name + ".layers", context)
        return Body(kind, body, spec.get("times", 1)), width + body_width if kind == "concat" else width
    if kind == "tied_linear":
        target = context["named"][spec["tie_to"]]
        layer = TiedLinear(target, spec.get("transpose", False), spec.get("bias", False))
        return layer, target.weight.shape[1 if layer.transpose else 0]
    if kind in ("scale", "bias"):
        n = spec["shape"][0]
        return (Scale if kind == "scale" else Bias)(spec["shape"]), n if width == 1 else width
    if kind == "raw_scale":
        owner_and_name = None
        if "param" in spec:
            owner, _, local = spec["param"].rpartition(".")
            owner_and_name = (context["named"][owner], local)
        layer = make_raw_scale(spec.get("shape"), owner_and_name, context["raw_access"], context["raw_gradient"])
        if context["raw_access"] == "external_parameter" and owner_and_name:
            context["external"].append((name, layer, getattr(*owner_and_name)))
        n = layer.declared_shape[0]
        return layer, n if width == 1 else width
    if kind == "moe":
        return Moe(width, spec["experts"], spec["hidden"]), width
    if kind == "embedding":
        return TokenEmbedding(context["vocab"], spec["dim"]), spec["dim"]
    if kind == "causal_self_attention":
        return CausalSelfAttention(width, spec["heads"], context["steps"], spec.get("bias", True),
                                   spec.get("proj_bias", True)), width
    raise ValueError(f"layer type {kind} is not mirrored here")


def build_layers(specs, width, prefix, context):
    """(ModuleList, output width) of the layer specs `specs` on `width` features, the i-th named
    prefix.i as zero3 names it; context["named"] collects name -> module for later tie_to / param."""
    layers = torch.nn.ModuleList()
    for i, spec in enumerate(specs):
        name = f"{prefix}.{i}"
        layer, width = build_layer(spec, width, name, context)
        if not spec.get("requires_grad", True):
            for param in layer.parameters():  # its own: a tied or read parameter is not a submodule's
                param.requires_grad_(False)
        # Every module by its zero3 name, nested ones too (an MoE's experts.0.fc): a later tie_to or
        # raw_scale param may name any module that owns a parameter.
        for inner, module in layer.named_modules():
            context["named"][f"{name}.{inner}" if inner else name] = module
        layers.append(layer)
    return layers, width


class Sequential(torch.nn.Module):
    """A sequential spec: `input_width` features in, its layers in order, `loss` mse or cross_entropy.
    A token model (a `vocab`): ids [B, context] in, the embedding's rows [B*context, dim] through the
    layers, next-token cross-entropy over every row against targets [B, context]."""

    def __init__(self, spec, raw_access="cached_reference", raw_gradient=False):
        super().__init__()
        self.loss_kind = spec["loss"]
        self.tokens = "vocab" in spec
        context = {"named": {}, "raw_access": raw_access, "raw_gradient": raw_gradient, "external": [],
                   "vocab": spec.get("vocab", 0), "steps": spec.get("context", 1)}
        width = 0 if self.tokens else spec["input_width"]
        self.layers, self.out_width = build_layers(spec["layers"], width, "layers", context)
        # (module name, module, parameter): external uses the framework should register.
        self.external_parameters = context["external"]

    def forward(self, x):
        return run_layers(self.layers, x)

    def loss(self, x, y):
        out = self(x)
        if self.tokens:  # bf16 logits as gpt's: cross-entropy in f32, its value reported in bf16
            wide = out.float() if out.dtype in (torch.bfloat16, torch.float16) else out  # f64 stays f64
            loss = F.cross_entropy(wide, y.reshape(-1).long())
            return loss, loss.to(out.dtype).item()
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


def build_model(spec, bf16=False, raw_access="cached_reference", raw_gradient=False):
    """The torch model of a zero3 model spec (a dict as MODEL_SPEC.md has it; keys other than the
    ones the kind needs are ignored). bf16 picks the gpt's GELU only: the caller casts the model."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Initializing zero-element tensors is a no-op"
        if spec["kind"] == "gpt":
            return make_gpt(spec, bf16)
        if spec["kind"] == "sequential":
            return Sequential(spec, raw_access, raw_gradient)
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
