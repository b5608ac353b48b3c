#!/usr/bin/env python3
"""Records a zero3 trace (traces/FORMAT.md) from any PyTorch nn.Module, for `zero3 replay`.

Forward pre/post hooks give the module enters and exits; a TorchFunctionMode sees every torch
function a module calls with an nn.Parameter argument, which is a checked access by the innermost
running module (so `F.linear(x, other.weight)` and tied heads show up as external parameters, as
ZeRO-3 must see them). Full backward pre/post hooks give the backward events when they nest
(they are informational: replay follows autograd's reverse order). Leaf modules record the bytes
of their outputs as activation_bytes. Flops are left to replay, which derives them from shapes
and `tokens`.

    import torch, record_torch_trace as rec
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    batches = [(torch.randn(8, 16), torch.randn(8, 4))]
    trace = rec.record(model, batches, lambda out, y: torch.nn.functional.mse_loss(out, y), name="mlp")
    rec.write(trace, "mlp.json")          # then: zero3 replay mlp.json --ranks 8

Command line: `record_torch_trace.py --demo OUT.json` records a small tied-embedding transformer.
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


def record(model, batches, loss_fn, steps=1, optimizer=None, name="torch-model", tokens=None, backward_hooks=True):
    """Runs `steps` optimizer steps of `model` over `batches` (one micro-step per (input, target)) and
    returns the trace as a dict. `tokens`: tokens per micro-step for derived flops (default: the
    input's rows; every element for integer token ids). `backward_hooks=False` leaves the backward
    events out, for models whose forward modifies a module's output in place (PyTorch refuses
    full backward hooks there)."""
    import torch
    import torch.utils._pytree as pytree
    from torch.overrides import TorchFunctionMode

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
                    output = model(inputs)
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
    first_input = batches[0][0]
    if tokens is None:
        tokens = first_input.numel() if not first_input.is_floating_point() else max(1, first_input.numel() // first_input.shape[-1])
    steps_json = []
    for events in step_events:
        events = _compact(events, own)
        if steps_json and steps_json[-1]["events"] == events:
            steps_json[-1]["repeat"] += 1
        else:
            steps_json.append({"ranks": "all", "repeat": 1, "events": events})
    dtype = recorder.params[0][3] if recorder.params else "f32"
    params = [p[:3] + ([p[3]] if p[3] != dtype else []) for p in recorder.params]
    return {"zero3_trace": 1, "source": "tools/record_torch_trace.py", "name": name,
            "dtype": dtype if dtype in ("f32", "bf16") else "f32", "tokens": int(tokens),
            "modules": recorder.modules, "params": params, "steps": steps_json}


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
    parser.add_argument("--demo", metavar="OUT", required=True, help="record the built-in demo model to OUT")
    args = parser.parse_args()
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
