"""The torch modules of zero3's sequential layer types (core/nn/*.cc), each with the forward math of
its C++ twin; torch_model.build_layers assembles them from a spec. Works on torch 1.13 (the outside
oracle's Debian torch) and on the runners' torch 2.x.

Parameters may be bf16. zero3 computes an op with any f32 operand in f32 and an op on bf16 operands
only in bf16, rounding its output: a feature model's inputs are f32, so its bf16 parameters are used
widened to f32 throughout; a token model's embedding gives bf16 rows from a bf16 table, so its
layers compute in bf16 as zero3's do (`operand`), until a sum_residual, whose row sum zero3 takes
against an f32 constant, promotes them to f32. A float64 model (the runners' exact reference)
computes in float64 throughout.
"""
import torch
import torch.nn.functional as F

LOW_PRECISION = (torch.bfloat16, torch.float16)


def operand(t, x):
    """A parameter as an op on activation `x` uses it: a bf16 or f16 one widened to f32 unless `x`
    has its dtype (zero3's promotion: any f32 operand makes the op f32); f32 and f64 as they are."""
    return t.float() if t.dtype in LOW_PRECISION and x.dtype != t.dtype else t


# How a raw_scale layer reaches the parameter it reads (torch_model's module docstring says why).
RAW_ACCESS = ("cached_reference", "own_forward", "parent_attribute", "external_parameter")


class Linear(torch.nn.Linear):
    """zero3's Linear [out, in]; a bf16 parameter meets an f32 input widened, as zero3's ops use it."""

    def forward(self, x):
        return F.linear(x, operand(self.weight, x), None if self.bias is None else operand(self.bias, x))


class UnusedLinear(Linear):
    """Registers a Linear's parameters and never uses them: the identity (core/nn/unused_linear.cc)."""

    def forward(self, x):
        return x


class LayerNorm(torch.nn.LayerNorm):
    def forward(self, x):  # eps 1e-5 as core/nn/layer_norm.h
        return F.layer_norm(x, self.normalized_shape, operand(self.weight, x), operand(self.bias, x), self.eps)


def rms_norm(x, normalized_shape, weight, eps):
    """F.rms_norm where this torch has it (2.4 on: the runners'); else its math written out for
    torch 1.13, in f32 for a bf16 or f16 x and rounded once at the end, as F.rms_norm's CPU kernel
    and zero3's rms_norm op round."""
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, normalized_shape, weight, eps)
    wide = x.float() if x.dtype in LOW_PRECISION else x
    out = wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps) * weight.to(wide.dtype)
    return out.to(x.dtype)


class RMSNorm(torch.nn.Module):
    """core/nn/rms_norm.cc: x * rsqrt(mean(x^2 over the features) + eps) * weight, the weight [w]
    starting at ones; no mean subtracted and no bias (eps 1e-5 as core/nn/rms_norm.h)."""

    def __init__(self, width, eps=1e-5):
        super().__init__()
        self.normalized_shape, self.eps = (width,), eps
        self.weight = torch.nn.Parameter(torch.ones(width))

    def forward(self, x):
        return rms_norm(x, self.normalized_shape, operand(self.weight, x), self.eps)


class SwiGLU(torch.nn.Module):
    """core/nn/swiglu.cc: down(silu(gate(x)) * up(x)), gate and up Linear(w, hidden), down
    Linear(hidden, w), each with a bias iff `bias`; not a residual (a spec wraps it in one). A
    hidden width or w of 0 gives zero-sized weights."""

    def __init__(self, width, hidden, bias=False):
        super().__init__()
        self.gate, self.up = Linear(width, hidden, bias=bias), Linear(width, hidden, bias=bias)
        self.down = Linear(hidden, width, bias=bias)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Act(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, x):  # zero3's GELU is the tanh approximation (cpu_kernels_elementwise.cc gelu_value)
        return F.gelu(x, approximate="tanh") if self.kind == "gelu" else F.relu(x)


class TokenEmbedding(torch.nn.Module):
    """A token model's layers.0 (core/nn/embedding.cc TokenEmbedding): ids [B, T] in, one row per
    token [B*T, dim] out, so the layers after it see rows as every sequential layer does."""

    def __init__(self, vocab, dim):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(vocab, dim).normal_())

    def forward(self, ids):
        return F.embedding(ids.long(), self.weight).reshape(ids.numel(), self.weight.shape[1])  # the table's dtype


def causal_attention(q, k, v):
    """softmax(q k^T / sqrt(head width) + causal mask) v over [B, heads, T, hd]: torch's sdpa where
    this torch has it (2.x, the runners'), else the same math written out (1.13, the outside
    oracle's Debian torch). A head width of 0 gives empty outputs either way."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    steps, width = q.shape[-2], q.shape[-1]
    scores = q @ k.transpose(-1, -2) * (width ** -0.5 if width else 1.0)
    mask = torch.ones(steps, steps, dtype=torch.bool).triu(1)
    return torch.softmax(scores.masked_fill(mask, float("-inf")), -1) @ v


class CausalSelfAttention(torch.nn.Module):
    """core/nn/attention.cc on token rows [B*T, C] of sequences of `steps` tokens: qkv [3C, C]
    (columns q | k | v, each head's hd contiguous, as GPT-2's c_attn), causal multi-head attention,
    proj [C, C]; named qkv and proj as zero3 names them."""

    def __init__(self, width, heads, steps, qkv_bias=True, proj_bias=True):
        super().__init__()
        self.heads, self.steps = heads, steps
        self.qkv = Linear(width, 3 * width, bias=qkv_bias)
        self.proj = Linear(width, width, bias=proj_bias)

    def forward(self, x):
        rows, width = x.shape
        parts = self.qkv(x).reshape(rows // self.steps, self.steps, 3, self.heads, width // self.heads)
        q, k, v = parts.permute(2, 0, 3, 1, 4).unbind(0)  # each [B, heads, T, hd]
        out = causal_attention(q, k, v).permute(0, 2, 1, 3).reshape(rows, width)
        return self.proj(out)


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
            # zero3's ones are an f32 constant: a bf16 y is summed in f32, and x + that sum is f32
            # (its promotion), so a bf16 token model computes in f32 from here on, as zero3's does.
            ones = torch.ones(y.shape[-1], 1, dtype=torch.float32 if y.dtype in LOW_PRECISION else y.dtype)
            return x + operand(y, ones) @ ones
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
        weight = operand(self.target.weight, x)
        return F.linear(x, weight.t() if self.transpose else weight, None if self.bias is None else operand(self.bias, x))


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
        return broadcast_apply(x, operand(self.scale, x), self.scale.shape, add=False)


class Bias(torch.nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(shape))

    def forward(self, x):
        return broadcast_apply(x, operand(self.bias, x), self.bias.shape, add=True)


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
        p = operand(p, x) if self.gradient else operand(p.detach(), x)
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
