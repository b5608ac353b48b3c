"""A token model's parts in a repro script (repro_model.py writes the rest): token ids in, the
embedding that turns them into one row per token, causal self-attention over each sequence's T
rows, and next-token cross-entropy over every row. The math is zero3py/torch_layers.py's
(TokenEmbedding, CausalSelfAttention) op for op, with the parameter names the runner has
(`layers.0.weight`, `layers.2.layers.1.qkv.bias`).

    attention_children(layer)   # [("qkv", params), ("proj", params)]: the modules it holds
    token_data(vocab)           # the DATA line: seeded ids [W*B, T] in, the next ids out
    attention_class()           # the class's text; the embedding is a plain nn.Embedding
"""
from zero3py.runners.repro_text import Call, constructor

# The layer types whose parameters live in child modules (an MoE's gate and experts, an
# attention's qkv and proj, a SwiGLU's gate, up and down), so the layer itself owns none directly.
NESTED = ("moe", "causal_self_attention", "swiglu")


def attention_children(layer):
    """(child name, local parameter name -> shape) of a causal_self_attention on `layer.width`
    features: qkv = Linear(w, 3w) and proj = Linear(w, w), each with its bias unless the spec
    turns it off (`bias` for qkv, `proj_bias` for proj)."""
    width, spec = layer.width, layer.spec
    children = []
    for child, rows, bias in (("qkv", 3 * width, spec.get("bias", True)), ("proj", width, spec.get("proj_bias", True))):
        children.append((child, {"weight": [rows, width], **({"bias": [rows]} if bias else {})}))
    return children


def check_attention(layer):
    heads = layer.spec["heads"]
    if heads < 1 or layer.width % heads:
        raise ValueError(f"{layer.name}: {heads} heads do not divide the width {layer.width}")


def attention_class():
    """CausalSelfAttention on rows [B*T, w], its qkv and proj Linears handed in (the model line
    says their sizes and biases): qkv's columns q | k | v, each head's contiguous (as GPT-2's
    c_attn), torch's sdpa with the causal mask over each sequence's T rows, then proj. The head
    width is the reshape's -1: the rows are never 0, so a width of 0 still resolves to 0."""
    return [
        "class CausalSelfAttention(nn.Module):  # multi-head causal attention within each sequence of T rows",
        *constructor("heads, qkv, proj", ["self.heads, self.qkv, self.proj = heads, qkv, proj"]),
        "    def forward(self, x): return self.proj(F.scaled_dot_product_attention(*self.qkv(x).reshape(len(x) // T, T, 3,",
        "        self.heads, -1).permute(2, 0, 3, 1, 4), is_causal=True).transpose(1, 2).reshape(x.shape))"]


def attention_expression(layer, bind=""):
    """CausalSelfAttention(heads, nn.Linear(w, 3w), nn.Linear(w, w)): a Call the layout may break."""
    width, spec = layer.width, layer.spec
    linears = [f"nn.Linear({width}, {rows}{'' if spec.get(key, True) else ', bias=False'})"
               for rows, key in ((3 * width, "bias"), (width, "proj_bias"))]
    return Call(bind + "CausalSelfAttention", [str(spec["heads"])] + linears)


def embedding_expression(layer, vocab):
    """A plain nn.Embedding: the script hands the model its ids flattened (ScriptModel.forward)."""
    return f"nn.Embedding({vocab}, {layer.spec['dim']})"


def token_data(vocab):
    """The seed and DATA lines of a token model: per step, GAS global batches of W*B sequences of
    T + 1 seeded ids in [0, vocab), the first T the inputs and the last T their next tokens."""
    return ["torch.manual_seed(SEED)  # the data: per step, GAS global batches of W*B sequences; then the model's "
            "weights",
            f"DATA = [[(s[:, :-1], s[:, 1:]) for s in torch.randint({vocab}, (GAS, W * B, T + 1))] "
            f"for _ in range(STEPS)]"]


def token_rows(tensor):
    """A token model's ids (inputs or targets, F32 in a case directory) as nested lists of ints."""
    return [[int(v) for v in row] for row in tensor.tolist()]
