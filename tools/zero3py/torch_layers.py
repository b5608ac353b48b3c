"""The torch modules of zero3's sequential layer types (core/nn/*.cc), each with the forward math of
its C++ twin; torch_model.build_layers assembles them from a spec. Works on torch 1.13 (the outside
oracle's Debian torch) and on the runners' torch 2.x.

Parameters may be bf16; they are used widened to f32 (zero3 computes an op with an f32 operand in
f32, and a sequential model's inputs are f32). A float64 model (the runners' exact reference)
computes in float64 throughout.
"""
import torch
import torch.nn.functional as F

def widened(t):
    """A parameter as the ops use it: bf16 and f16 widened to f32; f32 and f64 as they are."""
    return t.float() if t.dtype in (torch.bfloat16, torch.float16) else t


# How a raw_scale layer reaches the parameter it reads (torch_model's module docstring says why).
RAW_ACCESS = ("cached_reference", "own_forward", "parent_attribute", "external_parameter")


class Linear(torch.nn.Linear):
    """zero3's Linear [out, in]; a bf16 parameter is used widened, as zero3's f32-input ops use it."""

    def forward(self, x):
        return F.linear(x, widened(self.weight), None if self.bias is None else widened(self.bias))


class UnusedLinear(Linear):
    """Registers a Linear's parameters and never uses them: the identity (core/nn/unused_linear.cc)."""

    def forward(self, x):
        return x


class LayerNorm(torch.nn.LayerNorm):
    def forward(self, x):  # eps 1e-5 as core/nn/layer_norm.h
        return F.layer_norm(x, self.normalized_shape, widened(self.weight), widened(self.bias), self.eps)


class Act(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, x):  # zero3's GELU is the tanh approximation (cpu_kernels_elementwise.cc gelu_value)
        return F.gelu(x, approximate="tanh") if self.kind == "gelu" else F.relu(x)


class Body(torch.nn.Module):
    """The containers of core/nn/residual.cc and repeat.cc: concat [x, body(x)] on the last dim,
    residual x + body(x), sum_residual x + rowsum(body(x)), repeat body applied `times` times with
    the same weights. A raw_scale in parent_attribute mode gets its parameter from here."""

    def __init__(self, kind, layers, times=1):
        super().__init__()
        self.kind, self.layers, self.times = kind, layers, times

    def forward(self, x):
        y = run_layers(self.layers, x, self.times)
        if self.kind == "concat":
            return torch.cat([x, y], -1)
        if self.kind == "residual":
            return x + y
        if self.kind == "sum_residual":  # y @ ones[k, 1] as zero3 sums a row; k = 0 gives zeros
            return x + y @ torch.ones(y.shape[-1], 1, dtype=y.dtype)
        return y


def run_layers(layers, x, times=1):
    """Applies `layers` in order `times` times; a parent_attribute raw_scale is handed the value
    this (parent) code reads from the owner module's attribute, as user code of that kind does."""
    for _ in range(times):
        for layer in layers:
            if isinstance(layer, RawScale) and layer.access == "parent_attribute":
                x = layer(x, getattr(layer.owner, layer.local_name))
            else:
                x = layer(x)
    return x


class TiedLinear(torch.nn.Module):
    """F.linear over an earlier layer's weight (transposed: x @ W), owning only its optional bias."""

    def __init__(self, target, transpose, bias):
        super().__init__()
        self.__dict__["target"] = target  # not a submodule: the weight stays registered once
        self.transpose = transpose
        out = target.weight.shape[1 if transpose else 0]
        self.bias = torch.nn.Parameter(torch.zeros(out)) if bias else None

    def forward(self, x):
        weight = widened(self.target.weight)
        return F.linear(x, weight.t() if self.transpose else weight, None if self.bias is None else widened(self.bias))


def broadcast_apply(x, p, declared_shape, add):
    """x [N, w] + or * p, viewing x as [N, w, 1] when the parameter's declared shape has two dims
    (core/nn/broadcast_layers.cc apply): the view follows the declared shape, not the value's, so
    a partitioned placeholder meets x exactly as the real parameter would."""
    rows = x.shape[0]
    lhs = x.reshape(rows, x.shape[1], 1) if len(declared_shape) == 2 else x
    out = lhs + p if add else lhs * p
    return out.reshape(rows, -1) if len(declared_shape) == 2 else out


class Scale(torch.nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(shape))

    def forward(self, x):
        return broadcast_apply(x, widened(self.scale), self.scale.shape, add=False)


class Bias(torch.nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(shape))

    def forward(self, x):
        return broadcast_apply(x, widened(self.bias), self.bias.shape, add=True)


class RawScale(torch.nn.Module):
    """x * p with p read outside the framework's view of parameter use (core/nn/broadcast_layers.cc
    RawScale): zero3 reads it through the raw handle, a constant without gradient. `access` is how
    this torch module reaches p (RAW_ACCESS): cached_reference, the Parameter object kept in a plain
    attribute at construction, before any framework shards the model (the trap of DeepSpeed issue
    #930's class); own_forward, read from the owner module's attribute in this forward;
    parent_attribute, read by the enclosing container and passed in; external_parameter, read as
    own_forward and listed in the model's external_parameters for the framework to register.
    `gradient` lets the gradient flow into p (user code that forgot to detach), which zero3's raw
    handle never does."""

    def __init__(self, access, gradient):
        super().__init__()
        if access not in RAW_ACCESS:
            raise ValueError(f"raw access {access!r} is not one of {', '.join(RAW_ACCESS)}")
        self.access, self.gradient = access, gradient

    def bind(self, owner, local_name):
        """Reads owner.<local_name> (owner may be this module); caches the Parameter object now."""
        self.local_name = local_name
        self.__dict__["owner"] = owner  # not a submodule: the parameter stays registered once
        self.__dict__["cached"] = getattr(owner, local_name)  # captured before any sharding
        self.declared_shape = tuple(self.cached.shape)
        return self

    def forward(self, x, handed=None):
        if self.access == "parent_attribute":
            p = handed
        elif self.access == "cached_reference":
            p = self.cached
        else:
            p = getattr(self.owner, self.local_name)
        p = widened(p) if self.gradient else widened(p.detach())
        return broadcast_apply(x, p, self.declared_shape, add=False)


def make_raw_scale(shape, owner_and_name, access, gradient):
    """raw_scale with its own parameter `scale` of `shape` (owner_and_name None; zero3 names it
    layers.i.scale) or reading another module's parameter (owner module, local name)."""
    layer = RawScale(access, gradient)
    if owner_and_name is None:
        layer.scale = torch.nn.Parameter(torch.ones(shape))
        return layer.bind(layer, "scale")
    return layer.bind(*owner_and_name)


class Mlp(torch.nn.Module):
    """An MoE expert (core/nn/mlp.cc): fc, tanh GELU, proj; named experts.e.fc, experts.e.proj."""

    def __init__(self, width, hidden):
        super().__init__()
        self.fc, self.gelu, self.proj = Linear(width, hidden), Act("gelu"), Linear(hidden, width)

    def forward(self, x):
        return self.proj(self.gelu(self.fc(x)))


class Moe(torch.nn.Module):
    """Top-1 routing (core/nn/moe.cc): each row goes to the argmax of the gate logits (ties to the
    lowest index), its expert's output scaled by the gate's softmax probability for that expert;
    an expert without rows is not invoked, so ranks with different data run different experts."""

    def __init__(self, width, experts, hidden):
        super().__init__()
        self.gate = Linear(width, experts)
        self.experts = torch.nn.ModuleList(Mlp(width, hidden) for _ in range(experts))

    def forward(self, x):
        logits = self.gate(x)
        probs = torch.softmax(logits, -1)
        choice = torch.argmax(logits, -1)  # torch returns the first maximal index, as zero3
        out = None
        for e, expert in enumerate(self.experts):
            rows = torch.nonzero(choice == e).reshape(-1)
            if rows.numel() == 0:
                continue
            weighted = expert(x[rows]) * probs[rows, e:e + 1]
            placed = torch.zeros(x.shape[0], weighted.shape[1], dtype=weighted.dtype).index_copy(0, rows, weighted)
            out = placed if out is None else out + placed
        return out if out is not None else x * 0.0
