"""The class texts of the layer types a repro script writes with more than a line or two of its own
(repro_model.py calls them for the layers a case has): Moe (top-1 routing, experts as the runner
names them), TiedLinear (an earlier layer's weight, not registered again), RawScale (a
parameter read the case's way, torch.raw_access) and SwiGLU (gate, up and down). Each takes the
ScriptModel: which variants the case's layers need decides the constructor's arguments.
"""
from zero3py.runners.repro_text import WIDTH, assignments, constructor, method


def moe_class(model):
    """Moe(w, n, h): a gate and n experts (fc w -> h, tanh GELU, proj h -> w each:
    experts.e.fc.weight), top-1 routing. Each chosen expert's rows (the mask m) get its output,
    scaled, on zeros: the values torch_layers.Moe's index_copy and sum give."""
    forward = ["    def forward(self, x):  # only the experts some row chose run: ranks may run different experts",
               "        probs, choice, out = torch.softmax(logits := self.gate(x), -1), logits.argmax(-1), "
               "torch.zeros_like(x)",
               "        for e in choice.unique().tolist(): out[m] = self.experts[e](x[m := choice == e]) * "
               "probs[m, e:e + 1]",
               "        return out"]
    head = "class Moe(nn.Module):  # top-1 routing: a row goes to its argmax expert, scaled by that expert's probability"
    if getattr(model, "mlp_class", False):  # leaf_modules "mlp" under ZeRO-3: set_z3_leaf_modules takes their class
        return ["class Mlp(nn.Module):  # an expert: fc, tanh GELU, proj",
                *constructor("w, h", ["self.fc, self.gelu, self.proj = nn.Linear(w, h), nn.GELU(\"tanh\"), "
                                      "nn.Linear(h, w)"]),
                "    def forward(self, x): return self.proj(self.gelu(self.fc(x)))", head,
                *constructor("w, n, h", ["self.gate, self.experts = nn.Linear(w, n), nn.ModuleList(Mlp(w, h) for _ in "
                                         "range(n))"], "n experts, each w -> h -> w"), *forward]
    # The constructor's one statement continues over two lines: a def line, then each expert.
    return [head,
            "    def __init__(self, w, n, h): super().__init__(); self.gate, self.experts = nn.Linear(w, n), "
            "nn.ModuleList(",
            "            nn.Sequential(collections.OrderedDict(fc=nn.Linear(w, h), gelu=nn.GELU(\"tanh\"), "
            "proj=nn.Linear(h, w)))",
            "            for _ in range(n))  # n experts, each fc (w -> h), tanh GELU, proj (h -> w)", *forward]

def tied_class(model):
    tied = [layer for layer in model.all if layer.kind == "tied_linear"]
    transposes = {layer.spec.get("transpose", False) for layer in tied}
    biases = {"bias" in layer.params for layer in tied}
    mixed = len(transposes) > 1
    args = ["owner"] + (["transpose"] if mixed else []) + (["bias=False"] if len(biases) > 1 else [])
    weight = ("self.owner.weight.t() if self.transpose else self.owner.weight" if mixed
              else "self.owner.weight.t()" if True in transposes else "self.owner.weight")
    what = {frozenset({True}): "x @ W", frozenset({False}): "x @ W.T"}.get(frozenset(transposes),
                                                                           "x @ W or x @ W.T")
    pairs = [("self.__dict__[\"owner\"]", "owner")] + ([("self.transpose", "transpose")] if mixed else [])
    if True in biases:
        rows = ("owner.weight.size(1 if transpose else 0)" if mixed
                else "owner.weight.size(1)" if True in transposes else "owner.weight.size(0)")
        pairs.append(("self.bias", f"nn.Parameter(torch.zeros({rows}))" + (" if bias else None" if len(biases) > 1
                                                                          else "")))
        what += " + a bias" if len(biases) == 1 else " (+ a bias)"
    return [f"class TiedLinear(nn.Module):  # {what}; W: an earlier layer's weight, registered there only",
            *constructor(", ".join(args), assigned(pairs), "owner: a plain attribute, not a submodule"),
            *method("forward(self, x)", f"F.linear(x, {weight}{', self.bias' if True in biases else ''})")]

def assigned(pairs):
    """The pairs as one assignment where it fits in a constructor's line, else the last apart."""
    whole = assignments(pairs)
    return whole if len(whole[0]) <= WIDTH - 8 or len(pairs) == 1 else assignments(pairs[:-1]) + assignments(
        pairs[-1:])

def raw_scale_class(model):
    """RawScale: x * p, p read the case's way (torch.raw_access): a Parameter cached at
    construction, or read from its owner (a module and a name) in its forward or by its parent,
    which hands it in. A RawScale with a shape owns its p (registered as `scale`)."""
    raws = [layer for layer in model.all if layer.kind == "raw_scale"]
    own, foreign = any(r.owner is None for r in raws), any(r.owner is not None for r in raws)
    detach = "" if model.raw_gradient else ".detach()"
    access = model.access
    two, one = model.shapes()
    declared = two and one  # the broadcast follows the declared shape: keep it
    how = {"cached_reference": "a Parameter cached at construction (before sharding)",
           "own_forward": "read from its owner in this forward",
           "parent_attribute": "read from its owner by the parent, handed in",
           "external_parameter": "read from its owner in this forward"}[access]
    out = [f"class RawScale(nn.Module):  # x * p, p {how}" + ("" if model.raw_gradient else ", without gradient")]
    parameter = "nn.Parameter(torch.ones(shape))"
    if access == "cached_reference":
        comment = "p: a plain attribute, registered in its owner only"
        if own and foreign:
            shape = ", shape or p.shape" if declared else ""
            statements = [f"self.scale = {parameter} if p is None else None  # its own, or none",
                          f"self.__dict__[\"p\"]{', self.shape' if declared else ''} = self.scale if p is None "
                          f"else p{shape}"]
            args = "p=None, shape=None"
        elif own:
            statements, args = [f"self.scale = self.__dict__[\"p\"] = {parameter}"], "shape"
            comment = "p: the same Parameter as scale, not registered again"
        else:
            statements, args = ["self.__dict__[\"p\"] = p"], "p"
        if declared and not (own and foreign):
            statements.append("self.shape = self.p.shape")
        out += constructor(args, statements, comment)
        read = "self.p" + detach
    elif own and not foreign:  # its own parameter, read in its forward, or by the parent as layer.scale
        # The declared shape kept apart from the parameter, which a sharding framework replaces.
        statements = [f"self.scale, self.shape = {parameter}, shape" if declared else
                      f"self.scale = {parameter}"]
        out += constructor("shape", statements)
        read = "self.scale" + detach
    else:
        comment = "owner: a plain attribute, not a submodule"
        if own:
            shape = ", self.shape" if declared else ""
            statements = [f"self.scale = {parameter} if owner is None else None  # its own, or none",
                          f"self.__dict__[\"owner\"], self.name{shape} = owner or self, name"
                          + (", shape or getattr(owner, name).shape" if declared else "")]
            args = "owner=None, name=\"scale\", shape=None"
        else:
            statements, args = ["self.__dict__[\"owner\"], self.name = owner, name"], "owner, name"
            if declared:
                statements.append("self.shape = getattr(owner, name).shape")
        out += constructor(args, statements, comment)
        read = "getattr(self.owner, self.name)" + detach
    if access == "parent_attribute":
        return out + method("forward(self, x, p)", model.apply("*", "p" + detach, "self.shape"))
    return out + method("forward(self, x)", model.apply("*", read, "self.shape"))

def swiglu_children(layer):
    """(child name, local parameter name -> shape) of a swiglu on `layer.width` features, as
    torch_layers.SwiGLU names them: gate and up [hidden, w], down [w, hidden], each with a bias
    [rows] iff the spec's `bias` (default false)."""
    width, hidden, bias = layer.width, layer.spec["hidden"], layer.spec.get("bias", False)
    return [(child, {"weight": [rows, columns], **({"bias": [rows]} if bias else {})})
            for child, rows, columns in (("gate", hidden, width), ("up", hidden, width), ("down", width, hidden))]

def swiglu_class():
    """SwiGLU(w, h, b=False): nn.Linear children gate and up (w -> h) and down (h -> w), registered
    in that order as the runner's are, b their biases; down(silu(gate(x)) * up(x)), no residual."""
    linears = "nn.Linear(w, h, b), nn.Linear(w, h, b), nn.Linear(h, w, b)"
    return ["class SwiGLU(nn.Module):  # down(silu(gate(x)) * up(x)), LLaMA's feed-forward (no residual)",
            *constructor("w, h, b=False", [f"self.gate, self.up, self.down = {linears}"],
                         "gate and up w -> h, down h -> w; b: their biases"),
            *method("forward(self, x)", "self.down(F.silu(self.gate(x)) * self.up(x))")]

def swiglu_expression(layer):
    """SwiGLU(w, h), with `b=True` where the spec has biases (a frozen one gets its
    .requires_grad_(False) from repro_model.expression)."""
    return f"SwiGLU({layer.width}, {layer.spec['hidden']}{', b=True' if layer.spec.get('bias', False) else ''})"
