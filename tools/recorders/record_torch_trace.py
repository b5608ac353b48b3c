#!/usr/bin/env python3
"""Records a zero3 trace (traces/FORMAT.md) from any PyTorch nn.Module, for `zero3 replay`.

Forward pre/post hooks give the module enters and exits; a TorchFunctionMode sees every torch
function a module calls with an nn.Parameter argument, which is a checked access by the innermost
running module (so `F.linear(x, other.weight)` and tied heads show up as external parameters, as
ZeRO-3 must see them). Full backward pre/post hooks give the backward events when they nest
(they are informational: replay follows autograd's reverse order). Leaf modules record the bytes
of their outputs as activation_bytes. Flops are left to replay, which derives them from shapes
and `tokens`, except where a module computes with a weight it does not own (a tied head): replay
would count nothing there, so it gets explicit flops. The trace also says the `batch` and
`seq_len` it was recorded at (tokens = batch * seq_len), so that `zero3 replay --micro-batch B
--seq-len S` can rescale the recorded activation bytes and flops without recording again.

    import torch, record_torch_trace as rec
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    batches = [(torch.randn(8, 16), torch.randn(8, 4))]
    trace = rec.record(model, batches, lambda out, y: torch.nn.functional.mse_loss(out, y), name="mlp")
    rec.write(trace, "mlp.json")          # then: zero3 replay mlp.json --ranks 8

Command line: `record_torch_trace.py --demo OUT.json` records a small tied-embedding transformer;
`record_torch_trace.py --hf MODEL_TYPE OUT.json` records a Hugging Face causal LM built from its
config alone (tools/recorders/record_hf_trace.py).
"""
import argparse
import json
import sys

DTYPES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "float64": "f64", "int8": "i8",
          "uint8": "u8", "int32": "i32", "int64": "i64", "bool": "bool"}


def dtype_name(dtype):
    return DTYPES.get(str(dtype).replace("torch.", ""), "f32")


class _Recorder:
    def __init__(self, torch, model):
        self.torch = torch
        self.model = model
        self.module_names = {}
        self.modules = []
        for name, module in model.named_modules():
            self.module_names[id(module)] = name
            self.modules.append([name, type(module).__name__])
        self.param_names = {}
        self.params = []
        for name, param in model.named_parameters():  # shared (tied) parameters are listed once
            self.param_names[id(param)] = name
            self.params.append([len(self.params), name, list(param.shape), dtype_name(param.dtype)])
        self.stack = []          # [module name, parameter names accessed by this invocation]
        self.events = []
        self.backward_events = []
        self.handles = []

    def attach(self, backward_hooks):
        for module in self.model.modules():
            name = self.module_names[id(module)]
            leaf = len(list(module.children())) == 0
            self.handles.append(module.register_forward_pre_hook(self._enter(name)))
            self.handles.append(module.register_forward_hook(self._exit(name, leaf)))
            if backward_hooks and hasattr(module, "register_full_backward_pre_hook"):
                self.handles.append(module.register_full_backward_pre_hook(self._backward("bwd_enter", name)))
                self.handles.append(module.register_full_backward_hook(self._backward("bwd_exit", name)))

    def detach(self):
        for handle in self.handles:
            handle.remove()

    def _enter(self, name):
        def hook(module, inputs):
            self.stack.append([name, set(), len(self.events)])
            self.events.append(["enter", name])
        return hook

    def _exit(self, name, leaf):
        def hook(module, inputs, output):
            _, _, enter_index = self.stack.pop()
            if leaf:
                activation_bytes = sum(t.numel() * t.element_size() for t in _tensors(self.torch, output))
                if activation_bytes:
                    self.events[enter_index] = ["enter", name, None, activation_bytes]
            self.events.append(["exit", name])
        return hook

    def _backward(self, kind, name):
        def hook(module, *grads):
            self.backward_events.append([kind, name])
        return hook

    def on_parameter(self, param):
        if not self.stack:
            return  # used outside every module: ZeRO-3 would not gather it either; not a module access
        name, seen, _ = self.stack[-1]
        param_name = self.param_names.get(id(param))
        if param_name is not None and param_name not in seen:
            seen.add(param_name)
            self.events.append(["param", name, param_name])

    def take_backward(self):
        """The backward events if they nest properly, else none (they are informational)."""
        events, self.backward_events = self.backward_events, []
        open_modules = []
        for kind, name in events:
            if kind == "bwd_enter":
                open_modules.append(name)
            elif not open_modules or open_modules.pop() != name:
                print("record_torch_trace: backward hooks did not nest; leaving them out of this micro-step",
                      file=sys.stderr)
                return []
        return events if not open_modules else []


def _tensors(torch, value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(torch, item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(torch, item)]
    return []


def _external_flops(events, own_params, matmul_numel, module_types, tokens):
    """Writes explicit flops on the invocations that compute with a weight they do not own (a tied LM
    head): replay derives a module's flops from its own parameters only (traces/FORMAT.md), so
    left alone such a head would cost nothing. The explicit value is what replay would derive had
    the module owned them: 2 * tokens * numel over the >= 2-dim parameters it owns or uses;
    embedding lookups stay free."""
    events = list(events)
    open_enters = []   # index of the enter event of each running invocation
    extra = {}         # enter index -> external weight elements used
    for index, event in enumerate(events):
        if event[0] == "enter":
            open_enters.append(index)
        elif event[0] == "exit":
            open_enters.pop()
        elif event[0] == "param" and open_enters:
            module, param = event[1], event[2]
            if (param not in own_params.get(module, ()) and matmul_numel.get(param)
                    and "Embedding" not in module_types.get(module, "")):
                extra[open_enters[-1]] = extra.get(open_enters[-1], 0) + matmul_numel[param]
    for index, numel in extra.items():
        name = events[index][1]
        own = sum(matmul_numel.get(p, 0) for p in own_params.get(name, ()))
        activation = events[index][3:4]
        events[index] = ["enter", name, 2 * tokens * (own + numel)] + activation
    return events


def _numel(shape):
    count = 1
    for size in shape:
        count *= size
    return count


def _compact(events, own_params):
    """enter m, param m p for each of m's own parameters in order, exit m  ->  call m."""
    out = []
    i = 0
    while i < len(events):
        event = events[i]
        if event[0] == "enter":
            name = event[1]
            params = own_params.get(name, [])
            body = events[i + 1:i + 1 + len(params)]
            end = i + 1 + len(params)
            if (body == [["param", name, p] for p in params] and end < len(events)
                    and events[end] == ["exit", name]):
                out.append(["call"] + event[1:])
                i = end + 1
                continue
        out.append(event)
        i += 1
    return out


def _first_tensor(torch, value):
    """The tensor that says the micro-step's shape: the value itself, a dict's "input_ids" (a Hugging
    Face batch), else the first tensor found."""
    if isinstance(value, dict) and isinstance(value.get("input_ids"), torch.Tensor):
        return value["input_ids"]
    tensors = _tensors(torch, value)
    return tensors[0] if tensors else None


def input_shape(torch, first_input):
    """(batch, seq_len) that the first input implies, or None when it holds no tensor: integer token
    ids [B, S] (or [B, S, ...]) are B sequences of S tokens and [B] is B one-token sequences; float
    features [B, ..., F] are B sequences of numel / (B * F) positions (a [B, F] batch of feature
    vectors is B one-token sequences). These are the defaults record() writes; pass batch/seq_len
    where the input's layout says otherwise (a flattened [B * S, F])."""
    tensor = _first_tensor(torch, first_input)
    if tensor is None:
        return None
    if tensor.dim() == 0:
        return 1, 1
    batch = int(tensor.shape[0])
    if batch == 0:
        return None
    if tensor.is_floating_point() or tensor.is_complex():
        if tensor.dim() == 1:
            return 1, 1  # one feature vector
        return batch, max(1, tensor.numel() // (batch * int(tensor.shape[-1]) or 1))
    return batch, max(1, tensor.numel() // batch)


def micro_step_shape(torch, first_input, tokens=None, batch=None, seq_len=None):
    """(tokens, batch, seq_len) to write, batch and seq_len None when the trace should leave them out.
    Checked before recording, so a wrong argument fails in a second rather than after a long run.
    Only `tokens`: written alone (the caller knows the token count, not how it splits into
    sequences). `batch` or `seq_len` alone: the other is the input's tokens (or `tokens`) divided
    by it. Raises ValueError when the arguments contradict each other."""
    for label, value, least in (("batch", batch, 1), ("seq_len", seq_len, 1), ("tokens", tokens, 0)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
            raise ValueError(f"record(): {label} must be an integer >= {least}, not {value!r}")
    if batch is None and seq_len is None:
        if tokens is not None:
            return tokens, None, None
        shape = input_shape(torch, first_input)
        if shape is None:
            raise ValueError("record(): the first input holds no non-empty tensor to take batch and seq_len from; "
                             "pass batch= and seq_len= (or tokens=)")
        return shape[0] * shape[1], shape[0], shape[1]
    if batch is not None and seq_len is not None:
        if tokens is not None and tokens != batch * seq_len:
            raise ValueError(f"record(): tokens={tokens} contradicts batch={batch} * seq_len={seq_len} "
                             f"= {batch * seq_len}; give tokens = batch * seq_len, or leave tokens out")
        return batch * seq_len, batch, seq_len
    given_label, given = ("batch", batch) if batch is not None else ("seq_len", seq_len)
    if tokens is not None:
        total, source = tokens, f"tokens={tokens}"
    else:
        shape = input_shape(torch, first_input)
        if shape is None:
            raise ValueError(f"record(): {given_label}={given} without the other: pass both batch= and seq_len=")
        total, source = shape[0] * shape[1], f"the input's {shape[0] * shape[1]} tokens"
    if total % given:
        raise ValueError(f"record(): {given_label}={given} does not divide {source}; "
                         "pass both batch= and seq_len=")
    other = total // given
    if other < 1:
        raise ValueError(f"record(): {source} leave no whole sequence for {given_label}={given}")
    return (total, given, other) if batch is not None else (total, other, given)


def record(model, batches, loss_fn, steps=1, optimizer=None, name="torch-model", tokens=None, backward_hooks=True,
           batch=None, seq_len=None, notes=None):
    """Runs `steps` optimizer steps of `model` over `batches` (one micro-step per (input, target)) and
    returns the trace as a dict. An input that is a dict is passed as keyword arguments (a Hugging
    Face batch: `{"input_ids": ids, "labels": ids}` with `loss_fn = lambda out, _: out.loss`).
    `batch`, `seq_len`: sequences per micro-step and tokens per sequence that the recorded
    activation bytes belong to, written with tokens = batch * seq_len so replay can rescale them
    (default: from the first input, see input_shape()). `tokens` alone writes only the token
    count, for flops derived from shapes. `backward_hooks=False` leaves the backward
    events out, for models whose forward modifies a module's output in place (PyTorch refuses
    full backward hooks there). `notes` goes into the trace's notes (assumptions worth keeping
    next to the numbers)."""
    import torch
    import torch.utils._pytree as pytree
    from torch.overrides import TorchFunctionMode

    tokens, batch, seq_len = micro_step_shape(torch, batches[0][0], tokens, batch, seq_len)
    recorder = _Recorder(torch, model)

    class ParameterAccesses(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            flat, _ = pytree.tree_flatten((args, kwargs))
            for value in flat:
                if isinstance(value, torch.nn.Parameter):
                    recorder.on_parameter(value)
            return func(*args, **kwargs)

    recorder.attach(backward_hooks)
    step_events = []
    try:
        for _ in range(steps):
            for inputs, targets in batches:
                with ParameterAccesses():
                    output = model(**inputs) if isinstance(inputs, dict) else model(inputs)
                loss = loss_fn(output, targets)
                recorder.events.append(["backward"])
                loss.backward()
                recorder.events.extend(recorder.take_backward())
            if optimizer is not None:
                optimizer.step()
                optimizer.zero_grad()
            else:
                model.zero_grad()
            recorder.events.append(["optimizer_step"])
            step_events.append(recorder.events)
            recorder.events = []
    finally:
        recorder.detach()
    own = {}
    for param in recorder.params:
        owner = param[1].rsplit(".", 1)[0] if "." in param[1] else ""
        own.setdefault(owner, []).append(param[1])
    matmul_numel = {p[1]: _numel(p[2]) for p in recorder.params if len(p[2]) >= 2}
    module_types = dict(recorder.modules)
    steps_json = []
    for events in step_events:
        events = _compact(_external_flops(events, own, matmul_numel, module_types, tokens), own)
        if steps_json and steps_json[-1]["events"] == events:
            steps_json[-1]["repeat"] += 1
        else:
            steps_json.append({"ranks": "all", "repeat": 1, "events": events})
    dtype = recorder.params[0][3] if recorder.params else "f32"
    params = [p[:3] + ([p[3]] if p[3] != dtype else []) for p in recorder.params]
    trace = {"zero3_trace": 1, "source": "tools/recorders/record_torch_trace.py", "name": name,
             "dtype": dtype if dtype in ("f32", "bf16") else "f32", "tokens": int(tokens)}
    if batch is not None:
        trace["batch"], trace["seq_len"] = int(batch), int(seq_len)
    if notes:
        trace["notes"] = notes
    trace.update({"modules": recorder.modules, "params": params, "steps": steps_json})
    return trace


def write(trace, path):
    with open(path, "w") as out:
        json.dump(trace, out, separators=(",", ":"))
        out.write("\n")


def demo_model(torch):
    """A two-block transformer-ish model whose head reuses the embedding (a tied, external use)."""
    class Block(torch.nn.Module):
        def __init__(self, width):
            super().__init__()
            self.norm = torch.nn.LayerNorm(width)
            self.fc = torch.nn.Linear(width, 4 * width)
            self.proj = torch.nn.Linear(4 * width, width)

        def forward(self, x):
            return x + self.proj(torch.nn.functional.gelu(self.fc(self.norm(x))))

    class TiedHead(torch.nn.Module):
        def __init__(self, embedding):
            super().__init__()
            self.embedding = [embedding]  # not a submodule: the head only uses its weight

        def forward(self, x):
            return torch.nn.functional.linear(x, self.embedding[0].weight)

    class Demo(torch.nn.Module):
        def __init__(self, vocab=64, width=32):
            super().__init__()
            self.wte = torch.nn.Embedding(vocab, width)
            self.blocks = torch.nn.ModuleList([Block(width) for _ in range(2)])
            self.head = TiedHead(self.wte)

        def forward(self, tokens):
            x = self.wte(tokens)
            for block in self.blocks:
                x = block(x)
            return self.head(x)

    return Demo()


def main():
    parser = argparse.ArgumentParser(description="Record a zero3 trace from a PyTorch module")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--demo", metavar="OUT", help="record the built-in demo model to OUT")
    mode.add_argument("--hf", nargs=2, metavar=("MODEL_TYPE", "OUT"),
                      help="record a Hugging Face causal LM built from its config (tools/recorders/record_hf_trace.py)")
    import record_hf_trace
    record_hf_trace.add_arguments(parser)
    args = parser.parse_args()
    if args.hf:
        record_hf_trace.run(args)
        return
    import torch
    torch.manual_seed(0)
    model = demo_model(torch)
    tokens = torch.randint(0, 64, (2, 8))
    loss_fn = lambda logits, targets: torch.nn.functional.cross_entropy(logits.reshape(-1, 64), targets.reshape(-1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    trace = record(model, [(tokens, tokens)], loss_fn, steps=2, optimizer=optimizer, name="torch-demo")
    write(trace, args.demo)
    print(f"wrote {args.demo}: {len(trace['modules'])} modules, {len(trace['params'])} parameters")


if __name__ == "__main__":
    main()
