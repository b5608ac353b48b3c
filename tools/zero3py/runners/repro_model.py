"""A case's sequential model written out as plain PyTorch for a repro script (repro.py): the
nn.Module classes the case needs (each a few lines, the forward math of zero3py/torch_layers.py
op for op) and a module-level `model = Layers(...)` that assembles them into the module tree the
runner builds, so that a framework's per-module hooks see the same modules and parameter names
(`layers.2.layers.0.bias`); before it, DATA, drawn from the same seeded stream. Or, given the
case's own initial weights and data (`exact`, as case.read_case loads them: a finding that needs
those very numbers), BATCHES and INIT hold them as literals (float32 values written so that they
read back bit for bit) and `model` is loaded from INIT.

    model = ScriptModel(case)      # case: case.json as a dict
    model = ScriptModel(case, exact=(init, data))  # its weights and data as literals
    model.code()                   # the classes, the seed, DATA and `model = ...`, as text
    model.path("layers.1.scale")   # "model.layers[1].scale": a module or parameter from the root
    model.units(leaves)            # the modules FSDP2's fully_shard takes, in the runner's order

Besides the text it answers what the training loop needs to know of the model: whether any
trainable parameter reaches the loss (else no backward, as the runner skips it), and whether
one may go without a gradient (then it gets a zero one, as zero3 and ZeRO's partitions have it).
"""
import json
import re

from zero3py.runners import repro_classes as layer_classes
from zero3py.runners import repro_transformer as transformer
from zero3py.runners.repro_text import (WHOLE, WIDTH, Call, checked, constructor, fill_atoms, layout, literal_atoms,
                                        method, number)
from zero3py.runners.targets import LAYER_CLASSES
from zero3py.runners.training import Unsupported

CONTAINERS = ("concat", "residual", "sum_residual", "repeat")
OWNERS = ("linear", "unused_linear", "tied_linear", "layer_norm", "scale", "bias", "raw_scale", "moe", "embedding",
          "causal_self_attention", "rms_norm", "swiglu")
# Variable names for layers that later layers refer to (tie_to, a raw_scale's param).
SHORT = {"linear": "linear", "unused_linear": "unused", "layer_norm": "norm", "scale": "scale", "bias": "bias",
         "raw_scale": "raw", "moe": "moe", "tied_linear": "tied", "embedding": "embedding",
         "causal_self_attention": "attention", "rms_norm": "rms", "swiglu": "swiglu"}


class Layer:
    """One layer of the spec: its zero3 module name, input and output width, its own parameters
    (local name -> shape), and where inside it a nested module lives (an MoE's experts.1.fc)."""

    def __init__(self, spec, name, width):
        self.spec, self.name, self.width, self.kind = spec, name, width, spec["type"]
        self.out, self.params, self.children = width, {}, []
        self.frozen = not spec.get("requires_grad", True)


class Module:
    """A module a tie_to or a raw_scale's param may name: the layer it belongs to, the attribute
    path inside that layer ("" for the layer itself), its parameters (local name -> shape)."""

    def __init__(self, layer, inner, params):
        self.layer, self.inner, self.params = layer, inner, params


def attribute_path(dotted):
    """"experts.1.fc" -> ".experts[1].fc" (a Python expression's tail)."""
    return "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in dotted.split(".") if part)


class ScriptModel:
    def __init__(self, case, exact=None):
        model = case["model"]
        self.exact = exact  # (init, data): name -> tensor each, or None: drawn from the seed
        if model.get("kind") != "sequential":
            raise Unsupported(f"model kind {model.get('kind')}: a repro script writes sequential models only")
        self.case, self.loss_kind = case, model["loss"]
        self.access, self.raw_gradient = case["torch"]["raw_access"], case["torch"]["raw_gradient"]
        self.modules = {}  # zero3 module name -> Module
        self.referenced = {}  # layer name -> variable name in build()
        # A token model (a vocab): ids [B, T] in, its embedding's rows on; T also sizes an
        # attention's sequences, one row each in a feature model.
        self.vocab, self.steps = model.get("vocab"), model.get("context", 1)
        self.tokens = self.vocab is not None
        self.input_width = None if self.tokens else model["input_width"]
        self.layers, self.out = self.walk(model["layers"], self.input_width or 0, "layers")
        self.all = list(self.flat(self.layers))
        self.kinds = {layer.kind for layer in self.all}
        self.uses_sequences = self.tokens or "causal_self_attention" in self.kinds  # the script's T
        self.analyse_gradients()

    # -- the spec ------------------------------------------------------------------------------
    def walk(self, specs, width, prefix):
        layers = []
        for i, spec in enumerate(specs):
            layer = Layer(spec, f"{prefix}.{i}", width)
            kind = layer.kind
            if kind in ("linear", "unused_linear"):
                layer.params["weight"] = [spec["out"], width]
                if spec.get("bias", True):
                    layer.params["bias"] = [spec["out"]]
                layer.out = spec["out"] if kind == "linear" else width
            elif kind == "layer_norm":
                layer.params = {"weight": [width], "bias": [width]}
            elif kind == "rms_norm":
                layer.params = {"weight": [width]}
            elif kind == "swiglu":  # its parameters live in gate, up and down (repro_transformer.NESTED)
                for child, params in layer_classes.swiglu_children(layer):
                    self.modules[f"{layer.name}.{child}"] = Module(layer, child, params)
            elif kind in ("gelu", "relu"):
                pass
            elif kind in CONTAINERS:
                layer.children, body = self.walk(spec["layers"], width, layer.name + ".layers")
                layer.out = width + body if kind == "concat" else width
            elif kind == "tied_linear":
                owner = self.module(spec["tie_to"], "tie_to")
                self.refer(owner.layer)
                rows, columns = owner.params["weight"]
                layer.out = columns if spec.get("transpose", False) else rows
                layer.owner = owner
                if spec.get("bias", False):
                    layer.params["bias"] = [layer.out]
            elif kind in ("scale", "bias"):
                layer.params[kind] = list(spec["shape"])
                layer.declared = list(spec["shape"])
                layer.out = spec["shape"][0] if width == 1 else width
            elif kind == "raw_scale":
                if "param" in spec:
                    owner_name, _, local = spec["param"].rpartition(".")
                    layer.owner, layer.local = self.module(owner_name, "param"), local
                    self.refer(layer.owner.layer)
                    layer.declared = list(layer.owner.params[local])
                else:
                    layer.owner, layer.local = None, "scale"
                    layer.params["scale"] = list(spec["shape"])
                    layer.declared = list(spec["shape"])
                layer.out = layer.declared[0] if width == 1 else width
            elif kind == "embedding":
                if not self.tokens or layer.name != "layers.0":
                    raise ValueError(f"{layer.name}: an embedding is layers.0 of a model with a vocab only")
                layer.params["weight"], layer.out = [self.vocab, spec["dim"]], spec["dim"]
            elif kind == "causal_self_attention":
                transformer.check_attention(layer)
                for child, params in transformer.attention_children(layer):
                    self.modules[f"{layer.name}.{child}"] = Module(layer, child, params)
            elif kind == "moe":
                experts, hidden = spec["experts"], spec["hidden"]
                self.modules[layer.name + ".gate"] = Module(layer, "gate", {"weight": [experts, width],
                                                                            "bias": [experts]})
                for e in range(experts):
                    base = f"{layer.name}.experts.{e}"
                    self.modules[base] = Module(layer, f"experts.{e}", {})
                    self.modules[base + ".fc"] = Module(layer, f"experts.{e}.fc", {"weight": [hidden, width],
                                                                                   "bias": [hidden]})
                    self.modules[base + ".proj"] = Module(layer, f"experts.{e}.proj", {"weight": [width, hidden],
                                                                                       "bias": [width]})
            else:
                raise Unsupported(f"layer type {kind!r} is not one a repro script writes")
            self.modules[layer.name] = Module(layer, "", layer.params)
            layers.append(layer)
            width = layer.out
        return layers, width

    def module(self, name, key):
        if name not in self.modules:
            raise ValueError(f"{key} {name!r} names no earlier module")
        return self.modules[name]

    def refer(self, layer):
        """A layer a later one reads (tie_to, param): bound to a variable where build() makes it."""
        if layer.name not in self.referenced:
            name = SHORT[layer.kind]
            if name in self.referenced.values():
                name += layer.name.replace("layers.", "").replace(".", "_")
            self.referenced[layer.name] = name

    def flat(self, layers):
        for layer in layers:
            yield layer
            yield from self.flat(layer.children)

    def path(self, name):
        """A module or parameter of zero3's name as an expression from the root `model`."""
        return "model" + attribute_path(name)

    def owned(self):
        """(parameter name, owning layer, trainable) for every registered parameter."""
        for layer in self.all:
            for local in layer.params:
                yield f"{layer.name}.{local}", layer, not layer.frozen
            if layer.kind in transformer.NESTED:
                for name, module in self.modules.items():
                    if module.layer is layer and module.inner:
                        for local in module.params:
                            yield f"{name}.{local}", layer, not layer.frozen

    def analyse_gradients(self):
        """Which trainable parameters get a gradient: every one an op uses, but an unused_linear's
        (unless a tie or a raw read with gradient reaches it), a raw_scale's own one read without
        gradient, and an MoE's experts, which only the rows routed to them reach (all of them when
        it has one expert)."""
        reached, maybe = set(), set()
        for layer in self.all:
            if layer.kind in ("linear", "layer_norm", "rms_norm", "scale", "bias", "tied_linear", "embedding"):
                reached.update(f"{layer.name}.{local}" for local in layer.params)
            if layer.kind in ("causal_self_attention", "swiglu"):  # every row goes through each child
                reached.update(name for name, owner, _ in self.owned() if owner is layer)
            if layer.kind == "tied_linear":
                reached.add(self.param_name(layer.owner, "weight"))
            if layer.kind == "raw_scale" and self.raw_gradient:
                reached.add(f"{layer.name}.scale" if layer.owner is None else self.param_name(layer.owner, layer.local))
            if layer.kind == "moe":  # one expert: every row goes to it
                reached.update(name for name, owner, _ in self.owned() if owner is layer and (
                    ".experts." not in name or layer.spec["experts"] == 1))
        trainable = [name for name, _, train in self.owned() if train]
        for name, layer, train in self.owned():
            if train and layer.kind == "moe" and ".experts." in name and name not in reached:
                maybe.add(name)
        self.loss_has_gradient = any(name in reached or name in maybe for name in trainable)
        self.may_lack_gradient = any(name not in reached for name in trainable)

    @staticmethod
    def param_name(module, local):
        name = module.layer.name + ("." + module.inner if module.inner else "")
        return f"{name}.{local}"

    # -- FSDP2's units and DeepSpeed's leaves ----------------------------------------------------
    def module_order(self):
        """(name, owns parameters directly, layer) in named_modules() order, the root's children."""
        for layer in self.all:
            yield layer.name, bool(layer.params), layer
            if layer.kind == "moe":
                yield layer.name + ".gate", True, layer
                yield layer.name + ".experts", False, layer
                for e in range(layer.spec["experts"]):
                    base = f"{layer.name}.experts.{e}"
                    yield base, False, layer
                    yield base + ".fc", True, layer
                    yield base + ".gelu", False, layer
                    yield base + ".proj", True, layer
            if layer.kind == "causal_self_attention":
                for child, _ in transformer.attention_children(layer):
                    yield f"{layer.name}.{child}", True, layer
            if layer.kind == "swiglu":
                for child, _ in layer_classes.swiglu_children(layer):
                    yield f"{layer.name}.{child}", True, layer

    def leaf_names(self, leaves):
        """The module names zero3's leaf_modules select: a layer type the runner maps to a class
        (targets.LAYER_CLASSES: moe, an MoE's experts as mlp, causal_self_attention, embedding,
        swiglu) or a module name."""
        chosen = []
        for name, _, layer in self.module_order():
            is_type = name == layer.name and layer.kind in leaves and layer.kind in LAYER_CLASSES
            is_mlp = layer.kind == "moe" and re.fullmatch(re.escape(layer.name) + r"\.experts\.\d+", name)
            if is_type or (is_mlp and "mlp" in leaves) or name in leaves:
                chosen.append(name)
        return chosen

    def units(self, leaves):
        """What targets.train_fsdp2 hands fully_shard, in its order: each leaf (not inside
        another), each other module owning parameters outside the leaves, and the root."""
        chosen = self.leaf_names(leaves)
        tops = [n for n in chosen if not any(n.startswith(other + ".") for other in chosen if other != n)]
        inside = lambda name: any(name == top or name.startswith(top + ".") for top in tops)  # noqa: E731
        rest = [name for name, owns, _ in self.module_order() if owns and not inside(name)]
        return [self.path(n) for n in tops + rest] + ["model"]

    # -- the code ------------------------------------------------------------------------------
    def shapes(self):
        """(any broadcast parameter is [n, 1], any is [n]): which broadcast code the classes need."""
        shapes = [layer.declared for layer in self.all if layer.kind in ("scale", "bias", "raw_scale")]
        return any(len(s) == 2 for s in shapes), any(len(s) == 1 for s in shapes)

    def apply(self, op, p, shape):
        """`x op p` as torch_layers.broadcast_apply has it for this case's shapes: p [n, 1] meets x
        viewed as [B, w, 1] and the result is flattened back (`shape`: the declared one)."""
        two, one = self.shapes()
        if two and one:
            return f"broadcast(x, {p}, {shape}, torch.{'add' if op == '+' else 'mul'})"
        if two:
            return f"(x.reshape(len(x), x.shape[1], 1) {op} {p}).reshape(len(x), -1)"
        return f"x {op} {p}"

    def classes(self):
        """The class definitions (and the broadcast helper) the case's layers need, each a few lines:
        a constructor of one line where it fits (super().__init__() and the assignment)."""
        out, kinds = [], self.kinds
        two, one = self.shapes()
        if two and one:
            out += ["def broadcast(x, p, shape, op):  # p [n] meets x [B, w]; p [n, 1] meets x viewed as [B, w, 1]",
                    "    return op(x, p) if len(shape) == 1 else "
                    "op(x.reshape(len(x), x.shape[1], 1), p).reshape(len(x), -1)"]
        if "unused_linear" in kinds:
            out += ["class UnusedLinear(nn.Linear): forward = nn.Identity.forward  # registers a weight (and bias) its "
                    "forward never uses"]
        if "tied_linear" in kinds:
            out += layer_classes.tied_class(self)
        for kind, init in (("scale", "ones"), ("bias", "zeros")):
            if kind in kinds:
                op = "*" if kind == "scale" else "+"
                out += [f"class {kind.title()}(nn.Module):  # x {op} {kind}, starting at {init}",
                        *constructor("shape", [f"self.{kind} = nn.Parameter(torch.{init}(shape))"]),
                        *method("forward(self, x)", self.apply(op, "self." + kind, f"self.{kind}.shape"))]
        if "raw_scale" in kinds:
            out += layer_classes.raw_scale_class(self)
        if "moe" in kinds:
            out += layer_classes.moe_class(self)
        if "causal_self_attention" in kinds:
            out += transformer.attention_class()
        if "swiglu" in kinds:
            out += layer_classes.swiglu_class()
        out += self.container_classes()
        return out

    def container_classes(self):
        parent = "raw_scale" in self.kinds and self.access == "parent_attribute"
        repeat = "repeat" in self.kinds
        out = ["class Layers(nn.Module):  # layers held in an nn.ModuleList `layers`, applied in order: each container "
               "and the model"]
        if repeat:
            out += constructor("*layers, times=1", ["self.layers, self.times = nn.ModuleList(layers), times"],
                               "times: a repeat's, the same layers again")
            sequence = "list(self.layers) * self.times"
        else:
            out += constructor("*layers", ["self.layers = nn.ModuleList(layers)"])
            sequence = "self.layers"
        if parent:
            foreign = any(r.owner is not None for r in self.all if r.kind == "raw_scale")
            read = "getattr(layer.owner, layer.name)" if foreign else "layer.scale"
            loop = f"        for layer in {sequence}: x = layer(x, {read}) if isinstance(layer, RawScale) else layer(x)"
            reduce = (f"        return functools.reduce(lambda x, m: m(x, m.scale) if isinstance(m, RawScale) else "
                      f"m(x), {sequence}, x)")
            head = "    def forward(self, x):  # a RawScale gets its parameter from here, its parent"
            if not foreign and len(reduce) <= WIDTH:
                body = [reduce]
            elif len(loop) <= WIDTH:
                body = [loop, "        return x"]
            else:
                body = [f"        for layer in {sequence}:",
                        f"            x = layer(x, {read}) if isinstance(layer, RawScale) else layer(x)",
                        "        return x"]
            out += [head] + body
        else:
            out += method("forward(self, x)", f"functools.reduce(lambda x, layer: layer(x), {sequence}, x)")
        return out + [line for kind in ("concat", "residual", "sum_residual") if kind in self.kinds
                      for line in self.container(kind)]

    @staticmethod
    def container(kind):
        name, what, code = {
            "concat": ("Concat", "[x, layers(x)] on the features", "torch.cat([x, super().forward(x)], -1)"),
            "residual": ("Residual", "x + layers(x)", "x + super().forward(x)"),
            "sum_residual": ("SumResidual", "x + the row sums of layers(x)",
                             "x + (y := super().forward(x)) @ torch.ones(y.shape[-1], 1)")}[kind]
        return [f"class {name}(Layers):  # {what}", *method("forward(self, x)", code)]

    def forward(self, call, x):
        """`call`'s forward on the rows `x`; a token model's ids [B, T] go in flattened, one id a
        row, so that a plain nn.Embedding gives the rows [B*T, dim] that torch_layers'
        TokenEmbedding gives."""
        return f"{call}({x}.flatten())" if self.tokens else f"{call}({x})"

    def loss(self, output, target):
        if self.tokens:  # next-token cross-entropy over the B*T rows, targets [B, T] flattened as the rows are
            return f"F.cross_entropy({output}, {target}.flatten())"
        return f"F.{'mse_loss' if self.loss_kind == 'mse' else 'cross_entropy'}({output}, {target})"

    def expression(self, layer):
        """The constructor call of one layer (a referenced layer bound to its variable on the way:
        the arguments are evaluated in document order, so it exists before its readers)."""
        spec, kind, w = layer.spec, layer.kind, layer.width
        bind = f"{self.referenced[layer.name]} := " if layer.name in self.referenced else ""
        no_bias = "" if spec.get("bias", True) else ", bias=False"
        if kind == "linear":
            text = f"nn.Linear({w}, {spec['out']}{no_bias})"
        elif kind == "unused_linear":
            text = f"UnusedLinear({w}, {spec['out']}{no_bias})"
        elif kind == "layer_norm":
            text = f"nn.LayerNorm({w})"
        elif kind == "rms_norm":  # eps spelled out: nn.RMSNorm's default is the dtype's machine epsilon
            text = f"nn.RMSNorm({w}, eps=1e-5)"
        elif kind == "swiglu":
            text = layer_classes.swiglu_expression(layer)
        elif kind == "gelu":
            text = "nn.GELU(approximate=\"tanh\")"
        elif kind == "relu":
            text = "nn.ReLU()"
        elif kind in ("scale", "bias"):
            text = f"{kind.title()}({list(spec['shape'])})"
        elif kind == "tied_linear":
            tied = [t for t in self.all if t.kind == "tied_linear"]
            args = [self.owner_expression(layer.owner)]
            if len({t.spec.get("transpose", False) for t in tied}) > 1:
                args.append(str(spec.get("transpose", False)))
            if spec.get("bias", False) and len({"bias" in t.params for t in tied}) > 1:
                args.append("bias=True")
            text = f"TiedLinear({', '.join(args)})"
        elif kind == "raw_scale":
            text = self.raw_expression(layer)
        elif kind == "moe":
            text = f"Moe({w}, {spec['experts']}, {spec['hidden']})"
        elif kind == "embedding":
            text = transformer.embedding_expression(layer, self.vocab)
        elif kind == "causal_self_attention":
            call = transformer.attention_expression(layer, bind)
            call.tail = ".requires_grad_(False)" if layer.frozen else ""
            return call
        elif kind in CONTAINERS:
            head = {"concat": "Concat", "residual": "Residual", "sum_residual": "SumResidual", "repeat": "Layers"}[kind]
            args = [self.expression(c) for c in layer.children]
            args += [f"times={spec['times']}"] if kind == "repeat" else []
            return Call(bind + head, args, ".requires_grad_(False)" if layer.frozen and kind in OWNERS else "")
        else:
            raise Unsupported(f"layer type {kind!r}")
        return bind + text + (".requires_grad_(False)" if layer.frozen and kind in OWNERS else "")

    def raw_expression(self, layer):
        raws = [r for r in self.all if r.kind == "raw_scale"]
        mixed = len({r.owner is None for r in raws}) > 1
        shape = list(layer.spec.get("shape", []))
        if layer.owner is None:
            return f"RawScale(shape={shape})" if mixed else f"RawScale({shape})"
        owner = self.owner_expression(layer.owner)
        if self.access == "cached_reference":
            return f"RawScale({owner}.{layer.local})"
        return f"RawScale({owner}, {layer.local!r})"

    def owner_expression(self, module):
        return self.referenced[module.layer.name] + attribute_path(module.inner)

    def build(self):
        """The seeded model, a module-level `model` (each spawned rank imports the script and builds
        the same one; the parent's trains the reference), then DATA from the same seeded stream:
        per step, GAS global batches of W*B rows. With `exact`: the case's data and weights as
        literals instead (exact_build)."""
        model = layout(Call("model = Layers", [self.expression(layer) for layer in self.layers]), 0)
        if self.exact:
            return self.exact_build(model)
        if self.tokens:
            return transformer.token_data(self.vocab) + model
        out = ["torch.manual_seed(SEED)  # the data: per step, GAS global batches of W*B rows; then the model's "
               "weights"]
        target = (f"torch.randn(W * B, {self.out})" if self.loss_kind == "mse"
                  else f"torch.randint({self.out}, (W * B,))")
        head = f"DATA = [[(torch.randn(W * B, {self.input_width}), {target}) for _ in range(GAS)]"
        if len(head) + len(" for _ in range(STEPS)]") <= WIDTH:
            out += [head + " for _ in range(STEPS)]"]
        else:
            out += [head, "        for _ in range(STEPS)]"]
        return out + model

    def exact_build(self, model):
        """BATCHES (per step, GAS global batches of W*B rows: inputs as nested lists, targets as
        class ids or nested lists) and DATA its tensors; `model`, then INIT (each parameter's values
        flattened, a constant one as `[v] * n`) copied into it: the runner's numbers, bit for bit
        (a float32 as its shortest literal, number(), which torch.tensor reads back exactly)."""
        init, data = self.exact
        names = [name for name, _, _ in self.owned()]
        if set(init) != set(names):
            raise ValueError(f"the case's initial weights name {sorted(init)}, its model {sorted(names)}")
        batches = []
        for step in range(self.case["steps"]):
            batches.append([])
            for micro in range(self.case["gas"]):
                x, y = data[f"step{step}.micro{micro}.inputs"], data[f"step{step}.micro{micro}.targets"]
                if self.tokens:  # ids, inputs and targets alike: torch.tensor reads them back as longs
                    batches[-1].append([transformer.token_rows(x), transformer.token_rows(y)])
                    continue
                targets = y.tolist() if self.loss_kind == "mse" else [int(v) for v in y.tolist()]
                batches[-1].append([checked(x.tolist()), checked(targets)])
        out = ["# The case's own data and initial weights, each float32 bit for bit: seed-drawn ones did not reproduce "
               "it"]
        out += fill_atoms("BATCHES = ", literal_atoms(batches, whole=WHOLE),
                          "per step, GAS global batches of W*B rows: inputs, targets")
        out += ["DATA = [[(torch.tensor(x), torch.tensor(y)) for x, y in step] for step in BATCHES]"] + model
        atoms = []
        for name in names:
            values = checked(init[name].flatten().tolist())
            texts = [number(v) for v in values]
            if len(texts) > 1 and len(set(texts)) == 1:  # the same float32 throughout (the sign of a zero too)
                atoms.append(f"{json.dumps(name)}: [{texts[0]}] * {len(texts)},")
                continue
            inner = literal_atoms(values, whole=WHOLE)
            inner[0] = f"{json.dumps(name)}: {inner[0]}"
            atoms += inner[:-1] + [inner[-1] + ","]
        if atoms:
            atoms[0] = "{" + atoms[0]
            atoms[-1] = atoms[-1][:-1] + "}"
            out += fill_atoms("INIT = ", atoms, "each parameter's values flattened")
            out += ["for n, v in INIT.items(): (p := model.get_parameter(n)).data.copy_(torch.tensor(v).view_as(p))"
                    "  # in its shape"]
        return out

    def code(self):
        return self.classes() + self.build()
