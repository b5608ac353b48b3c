#!/usr/bin/env python3
"""Records a zero3 trace (traces/FORMAT.md) of a PyTorch model with what its activations really
cost: per module invocation, the bytes autograd keeps, the temporaries its forward and backward
need on top, and its inputs (what a checkpointed module holds). Runs on fake tensors
(FakeTensorMode: shapes, no storage), so GPT-3 175B records in seconds on a laptop; needs torch >= 2.5
(the runners' venv: tools/lib/diff_venv.sh).

    record_memory_trace.py gpt2-124m gpt2.json                 # a model of tools/recorders/memory_models.py
    record_memory_trace.py --hf llama llama.json --config-json cfg.json --seq-len 4096   # transformers
    record_memory_trace.py --shipped traces/models/recorded    # the shipped dense traces

How. A TorchDispatchMode sees every aten op's outputs and tracks their untyped storages as torch's
MemTracker does (each storage counted once, from the op that made it until the storage is freed);
parameters, buffers, the batch and parameter gradients (a parameter's hook and post-accumulate-grad
hook take a gradient's storage out of the count) are not activation memory. torch's ModTracker
gives the forward module boundaries: the innermost running module owns each op. In backward, each
op belongs to the module whose forward created the autograd node that runs it
(torch._C._current_autograd_node(); a TorchFunctionMode labels each node with its module as the
forward creates it): ModTracker's post-backward hooks sit on a module's positional inputs, so for
modules called with keyword arguments (Hugging Face's attention) they fire only at the end of
backward. Per invocation M (the innermost running module; an invocation's own ops, not its children's):

  ACTIVATION_BYTES (kept)  storages made by M's own ops in forward that are alive when backward
                           starts; summed over the model (plus the loss's, on the `backward`
                           event) it is MemTracker's ACT at the start of backward;
  forward_transient        max over M's own forward ops of (live bytes - the reference model's
                           `current` at M's exit), at least 0 (tools/recorders/activation_model.py);
  backward_transient       the same over the backward ops of M's autograd nodes, against
                           `current` at M's backward begin;
  input_bytes              M's tensor inputs that require grad, each storage once, and none an
                           earlier invocation of the same type under the same parent took;
  released_at_backward_begin  (invocations with children, and the loss) the part of kept that
                           autograd frees before any child's backward starts;
  output_bytes             M's outputs made by M or its children (0 for a view of its input).

Ops outside every module (a loss computed after the model returns) go on the `backward` event.
Transients are taken against the reference model's `current` rather than the live bytes at the
start of M's segment: what is live but not yet in `current` (an enclosing module's residual
stream, the gradient flowing into M in backward: GPT-2's logits gradient, 411 MB at 4 x 1024) is then
part of the transient, and the model reproduces the recorded peak exactly.

The model is recorded twice, at seq_len and seq_len / 2, and each amount split into a part linear
in tokens and one growing with seq_len^2 ({"linear": a, "quadratic": q}; eager attention's
probabilities), as tools/recorders/record_hf_trace.py does. Events, parameters, checked accesses and tied
heads are what tools/recorders/record_torch_trace.py writes; one step, written with "repeat": 2.

Trace additions (the enter/call options object and the backward event):
  ["enter", M, FLOPS|null, KEPT, {"output_bytes": N, "input_bytes": A, "forward_transient": A,
                                  "backward_transient": A, "released_at_backward_begin": A}]
  ["backward", KEPT, {"forward_transient": A, "backward_transient": A, "released_at_backward_begin": A}]
  "recorder": {"tool": "tools/recorders/record_memory_trace.py", "torch": "2.15.0", "transformers": null,
               "attention": "sdpa", "how": "..."}
(A: a number or {"linear": a, "quadratic": q}; KEPT too.) Zero amounts are left out of the options
object; an event without any amount stays ["enter", M]. tools/recorders/activation_model.py states how the
replay uses them.
"""
import argparse
import contextlib
import json
import os
import sys
import time
import weakref

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import activation_model  # noqa: E402
import record_torch_trace as rec  # noqa: E402

TOOL = "tools/recorders/record_memory_trace.py"
OWNER = "zero3_owner"  # key in autograd nodes' metadata: the index of the invocation that made them
LOSS = -1  # the owner of ops outside every module


def watch_parameter_gradients(node, on_gradient):
    """Calls on_gradient(tensor) with each gradient `node` hands to a parameter (an AccumulateGrad
    edge) as soon as the node has run: a tied weight's first gradient waits in autograd's input
    buffer until the last use's is added, so hooks on the parameter see it only at the end of
    backward (GPT-3's tied wte: 1.2 GB held through all of backward)."""
    edges = [i for i, (next_node, _) in enumerate(node.next_functions)
             if next_node is not None and type(next_node).__name__ == "AccumulateGrad"]
    if edges:
        def hook(grad_inputs, grad_outputs):
            for i in edges:
                if i < len(grad_inputs) and grad_inputs[i] is not None:
                    on_gradient(grad_inputs[i])
        node.register_hook(hook)


def gradient_marker(on_gradient):
    """A TorchFunctionMode that calls watch_parameter_gradients on every autograd node the forward
    makes (for the oracle; the recorder does it as it labels nodes)."""
    import torch
    import torch.utils._pytree as pytree
    from torch.overrides import TorchFunctionMode

    key = "zero3_gradient_watch"

    class Marker(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if torch.is_grad_enabled() and torch._C._current_graph_task_id() == -1:
                pending = [v.grad_fn for v in pytree.tree_leaves(out)
                           if isinstance(v, torch.Tensor) and v.grad_fn is not None]
                while pending:
                    node = pending.pop()
                    if node is None or type(node).__name__ == "AccumulateGrad" or key in node.metadata:
                        continue
                    node.metadata[key] = True
                    watch_parameter_gradients(node, on_gradient)
                    pending.extend(next_node for next_node, _ in node.next_functions)
            return out

    return Marker()


class _Storage:
    __slots__ = ("nbytes", "owner", "counted", "created")

    def __init__(self, nbytes, owner, counted, created=0):
        self.nbytes, self.owner, self.counted, self.created = nbytes, owner, counted, created


class _Invocation:
    __slots__ = ("index", "name", "enter_event", "end", "input_bytes", "output_bytes", "child_inputs")

    def __init__(self, index, name, enter_event):
        self.index, self.name, self.enter_event = index, name, enter_event
        self.end = None  # one past the last index of its subtree, set at exit
        self.input_bytes = 0
        self.output_bytes = 0
        self.child_inputs = {}  # module type -> storages (_Storage records) already inputs of a child


class MemoryRecording:
    """One micro-step of `model` under the storage tracker: call run(make_batch, loss_fn) once."""

    def __init__(self, model):
        import torch
        from torch.utils.weak import WeakIdKeyDictionary

        self.torch = torch
        self.model = model
        self.events = rec._Recorder(torch, model)  # module/param tables, enter/param/exit events
        self.storages = WeakIdKeyDictionary()
        self.live = 0
        self.phase = "forward"
        self.stack = []  # open invocations (forward)
        self.invocations = []
        self.top_level_inputs = {}
        self.backward_owner = LOSS
        # one sample per op: (backward?, owner, live bytes after the op's outputs were added)
        self.samples = []
        self.gradients = []  # (first sample, end sample, bytes): a gradient counted before it was known
        self.frees = []  # (forward owner, sample, bytes): a kept storage freed in backward
        self.kept = {}

    # --- storages ------------------------------------------------------------------------------
    def _storages(self, tensor):
        from torch.distributed._tools.common_utils import get_untyped_storages
        return get_untyped_storages(tensor)

    def preexisting(self, tensor):
        """Storages that are not activation memory (parameters, buffers, the batch)."""
        for storage in self._storages(tensor):
            if storage not in self.storages:
                self.storages[storage] = _Storage(storage.nbytes(), None, False)

    def _freed(self, info, _ref):
        if info.counted:
            info.counted = False
            self.live -= info.nbytes
            if self.phase == "backward" and info.owner is not None:
                self.frees.append((info.owner, len(self.samples), info.nbytes))

    def track(self, tensor, owner):
        for storage in self._storages(tensor):
            if storage in self.storages:
                continue
            info = _Storage(storage.nbytes(), owner if self.phase == "forward" else None, True, len(self.samples))
            self.storages[storage] = info
            weakref.finalize(storage, self._freed, info, None)
            self.live += info.nbytes

    def exclude(self, tensor):
        """A parameter's gradient: zero3 accounts it itself (its `grad` category, from the module's
        backward), so it is not activation memory from the op that made it on: the samples it was
        counted in are corrected afterwards (peaks())."""
        if tensor is None:
            return
        for storage in self._storages(tensor):
            info = self.storages.get(storage)
            if info is None:
                self.storages[storage] = _Storage(storage.nbytes(), None, False)
            elif info.counted:
                info.counted = False
                self.live -= info.nbytes
                self.gradients.append((info.created, len(self.samples), info.nbytes))

    # --- owners --------------------------------------------------------------------------------
    def owner(self):
        if self.phase == "forward":
            return self.stack[-1].index if self.stack else LOSS
        node = self.torch._C._current_autograd_node()
        if node is not None:  # nodes without a label (AccumulateGrad) keep the previous owner
            owner = node.metadata.get(OWNER)
            if owner is not None:
                self.backward_owner = owner
        return self.backward_owner

    def after_op(self, outputs):
        import torch.utils._pytree as pytree
        owner = self.owner()
        for value in pytree.tree_leaves(outputs):
            if isinstance(value, self.torch.Tensor):
                self.track(value, owner)
        self.samples.append((self.phase == "backward", owner, self.live))

    def peaks(self):
        """({owner: peak live bytes while it was innermost} for forward and for backward, and the
        same for the growth within one segment over its start), gradients taken out of every
        sample from the op that made them."""
        correction = [0] * (len(self.samples) + 1)
        for first, end, nbytes in self.gradients:
            correction[first] += nbytes
            correction[end] -= nbytes
        peaks, growth = ({}, {}), ({}, {})
        running, previous_owner, previous_live, start = 0, None, 0, 0
        for i, (backward, owner, live) in enumerate(self.samples):
            running += correction[i]
            live -= running
            if (backward, owner) != previous_owner:
                previous_owner, start = (backward, owner), previous_live
            phase_peaks, phase_growth = peaks[backward], growth[backward]
            if live > phase_peaks.get(owner, -1):
                phase_peaks[owner] = live
            if live - start > phase_growth.get(owner, -1):
                phase_growth[owner] = live - start
            previous_live = live
        return peaks, growth

    def label_nodes(self, outputs):
        """Marks the autograd nodes a forward function call made with the innermost invocation."""
        import torch.utils._pytree as pytree
        owner = self.stack[-1].index if self.stack else LOSS
        pending = [v.grad_fn for v in pytree.tree_leaves(outputs)
                   if isinstance(v, self.torch.Tensor) and v.grad_fn is not None]
        while pending:
            node = pending.pop()
            if node is None or type(node).__name__ == "AccumulateGrad" or OWNER in node.metadata:
                continue
            node.metadata[OWNER] = owner
            watch_parameter_gradients(node, self.exclude)
            pending.extend(next_node for next_node, _ in node.next_functions)

    # --- module boundaries (ModTracker) ----------------------------------------------------------
    def pre_forward(self, module, inputs):
        if self.phase != "forward":
            return
        name = self.events.module_names.get(id(module))
        if name is None:
            return
        invocation = _Invocation(len(self.invocations), name, len(self.events.events))
        self.invocations.append(invocation)
        self.stack.append(invocation)
        self.events._enter(name)(module, inputs)

    def post_forward(self, module, inputs, output):
        if self.phase != "forward" or id(module) not in self.events.module_names:
            return
        invocation = self.stack.pop()
        invocation.end = len(self.invocations)
        made = set()
        for tensor in rec._tensors(self.torch, output):
            for storage in self._storages(tensor):
                info = self.storages.get(storage)
                if (info is not None and info.counted and info.owner is not None
                        and invocation.index <= info.owner < invocation.end and id(storage) not in made):
                    made.add(id(storage))
                    invocation.output_bytes += info.nbytes
        self.events.events.append(["exit", invocation.name])
        self.events.stack.pop()

    def inputs_hook(self, module, args, kwargs):
        """with_kwargs forward pre-hook (after ModTracker's global one): the invocation's inputs that
        require grad, each storage once, and not one an earlier sibling invocation of the same
        module type (same parent) already took: T5 hands one position bias and one encoder output to
        every decoder block, which checkpointing holds once, not once per block."""
        if self.phase != "forward" or not self.stack:
            return
        import torch.utils._pytree as pytree
        invocation = self.stack[-1]
        by_type = self.stack[-2].child_inputs if len(self.stack) > 1 else self.top_level_inputs
        siblings = by_type.setdefault(type(module).__name__, set())
        for value in pytree.tree_leaves((args, kwargs)):
            if isinstance(value, self.torch.Tensor) and value.requires_grad:
                for storage in self._storages(value):
                    info = self.storages.get(storage)
                    if info is not None and info.counted and info not in siblings:
                        siblings.add(info)
                        invocation.input_bytes += info.nbytes

    # --- the step ----------------------------------------------------------------------------------
    def run(self, batch, loss_fn):
        """Forward (`loss_fn(model, batch)` returns the loss; outputs it drops are freed before
        backward, as in a training loop) and backward, recorded."""
        import torch
        import torch.utils._pytree as pytree
        from torch.distributed._tools.mod_tracker import ModTracker
        from torch.overrides import TorchFunctionMode
        from torch.utils._python_dispatch import TorchDispatchMode

        recording = self

        class Storages(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                recording.after_op(out)
                return out

        class Functions(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                if recording.phase == "forward":
                    for value in pytree.tree_leaves((args, kwargs)):
                        if isinstance(value, torch.nn.Parameter):
                            recording.events.on_parameter(value)
                out = func(*args, **kwargs)
                if recording.phase == "forward":
                    recording.label_nodes(out)
                return out

        for tensor in list(self.model.parameters()) + list(self.model.buffers()):
            self.preexisting(tensor)
        for tensor in pytree.tree_leaves(batch):
            if isinstance(tensor, torch.Tensor):
                self.preexisting(tensor)
        handles = []
        for param in self.model.parameters():
            handles.append(param.register_hook(lambda grad: self.exclude(grad)))
            handles.append(param.register_post_accumulate_grad_hook(lambda p: self.exclude(p.grad)))
        for module in self.model.modules():
            handles.append(module.register_forward_pre_hook(self.inputs_hook, with_kwargs=True))
        tracker = ModTracker()
        tracker.register_user_hooks(self.pre_forward, self.post_forward)
        try:
            with tracker, Functions(), Storages():
                loss = loss_fn(self.model, batch)
                self.phase = "backward"
                for info in self.storages.values():
                    if info.counted:
                        self.kept[info.owner] = self.kept.get(info.owner, 0) + info.nbytes
                self.events.events.append(["backward"])
                loss.backward()
                del loss
        finally:
            for handle in handles:
                handle.remove()
            tracker.clear_user_hooks()
        return self

    # --- the amounts -----------------------------------------------------------------------------
    def early_releases(self):
        """{owner: bytes of its kept that backward frees before any of its children's backward
        starts} (a module's own saved tensors, such as the loss's log-probabilities, freed by its
        first backward ops); for the loss (LOSS), before any module's backward starts. Only for
        invocations with children and the loss: for a leaf, its backward's begin and end are one."""
        first_backward = {}
        for i, (backward, owner, _) in enumerate(self.samples):
            if backward and owner not in first_backward:
                first_backward[owner] = i
        end_of_samples = len(self.samples)
        limit = {LOSS: min([v for k, v in first_backward.items() if k != LOSS], default=end_of_samples)}
        for inv in self.invocations:
            if inv.end > inv.index + 1:
                limit[inv.index] = min([first_backward[o] for o in range(inv.index + 1, inv.end)
                                        if o in first_backward], default=end_of_samples)
        early = {}
        for owner, sample, nbytes in self.frees:
            if owner in limit and sample < limit[owner]:
                early[owner] = early.get(owner, 0) + nbytes
        return early

    def amounts(self):
        """Per invocation: kept, early release, forward/backward transients (against the reference
        model's current), input and output bytes; and the loss's. Also the transients taken
        against the live bytes at each segment's start ("segment"), for comparison."""
        early = self.early_releases()
        nodes = []
        for inv in self.invocations:
            nodes.append(activation_model.Invocation(inv.name, "", self.kept.get(inv.index, 0), 0, 0,
                                                     inv.input_bytes, early.get(inv.index, 0)))
        roots, open_invocations = [], []
        for inv in self.invocations:  # in pre-order; a subtree is [index, end)
            while open_invocations and open_invocations[-1].end <= inv.index:
                open_invocations.pop()
            parent = open_invocations[-1] if open_invocations else None
            (nodes[parent.index].children if parent else roots).append(nodes[inv.index])
            open_invocations.append(inv)
        loss = activation_model.Invocation("", "", self.kept.get(LOSS, 0), early=early.get(LOSS, 0))
        index = {id(node): i for i, node in enumerate(nodes)}
        index[id(loss)] = LOSS
        currents = {}

        def probe(where, node, current):
            currents[(where, index[id(node)])] = current

        activation_model.walk(roots, loss, (), probe)
        peaks, growth = self.peaks()
        result = {}
        for i in [LOSS] + list(range(len(self.invocations))):
            fwd_key = ("loss_forward", LOSS) if i == LOSS else ("forward", i)
            bwd_key = ("loss_backward", LOSS) if i == LOSS else ("backward", i)
            fwd = peaks[False].get(i)
            bwd = peaks[True].get(i)
            result[i] = {
                "kept": self.kept.get(i, 0),
                "released_at_backward_begin": early.get(i, 0),
                "forward_transient": int(max(0, fwd - currents[fwd_key])) if fwd is not None else 0,
                "backward_transient": int(max(0, bwd - currents[bwd_key])) if bwd is not None else 0,
                "segment_forward_transient": max(0, growth[False].get(i, 0)),
                "segment_backward_transient": max(0, growth[True].get(i, 0)),
                "input_bytes": 0 if i == LOSS else self.invocations[i].input_bytes,
                "output_bytes": 0 if i == LOSS else self.invocations[i].output_bytes,
            }
        return result

    def peak_live(self):
        peaks, _ = self.peaks()
        return max([0] + [v for phase in peaks for v in phase.values()])


def _event_with_amounts(kind, name, flops, kept, options):
    options = {k: v for k, v in options.items() if v}
    event = [kind, name]
    if flops is not None or kept or options:
        event.append(flops)
    if kept or options:
        event.append(kept or 0)
    if options:
        event.append(options)
    return event


def _events(recording, transients="model"):
    """The recorded micro-step's events (enter/param/exit/backward/optimizer_step) with the amounts."""
    amounts = recording.amounts()
    prefix = "" if transients == "model" else "segment_"
    events = list(recording.events.events)
    own = {}
    for param in recording.events.params:
        owner = param[1].rsplit(".", 1)[0] if "." in param[1] else ""
        own.setdefault(owner, []).append(param[1])
    matmul_numel = {p[1]: rec._numel(p[2]) for p in recording.events.params if len(p[2]) >= 2}
    module_types = dict(recording.events.modules)
    return events, amounts, own, matmul_numel, module_types, prefix


def build_trace(recording, name, batch, seq_len, transients="model"):
    """The trace dict of one recording (amounts as plain numbers)."""
    events, amounts, own, matmul_numel, module_types, prefix = _events(recording, transients)
    tokens = batch * seq_len
    events = rec._external_flops(events, own, matmul_numel, module_types, tokens)
    by_event = {inv.enter_event: inv.index for inv in recording.invocations}
    out = []
    for index, event in enumerate(events):
        if event[0] == "enter":
            a = amounts[by_event[index]]
            flops = event[2] if len(event) > 2 else None
            out.append(_event_with_amounts("enter", event[1], flops, a["kept"], {
                "output_bytes": a["output_bytes"], "input_bytes": a["input_bytes"],
                "forward_transient": a[prefix + "forward_transient"],
                "backward_transient": a[prefix + "backward_transient"],
                "released_at_backward_begin": a["released_at_backward_begin"]}))
        elif event[0] == "backward":
            a = amounts[LOSS]
            options = {k: v for k, v in (("forward_transient", a[prefix + "forward_transient"]),
                                         ("backward_transient", a[prefix + "backward_transient"]),
                                         ("released_at_backward_begin", a["released_at_backward_begin"])) if v}
            out.append(["backward"] + ([a["kept"]] if a["kept"] or options else []) + ([options] if options else []))
        else:
            out.append(event)
    out.append(["optimizer_step"])
    out = rec._compact(out, own)
    dtype = recording.events.params[0][3] if recording.events.params else "f32"
    params = [p[:3] + ([p[3]] if p[3] != dtype else []) for p in recording.events.params]
    trace = {"zero3_trace": 1, "source": TOOL, "name": name,
             "dtype": dtype if dtype in ("f32", "bf16") else "f32", "tokens": tokens,
             "batch": batch, "seq_len": seq_len,
             "modules": recording.events.modules, "params": params,
             "steps": [{"ranks": "all", "repeat": 2, "events": out}]}
    return trace


def _split(full_value, half_value, ratio):
    """A number or {"linear": l, "quadratic": q} from the amounts at seq_len and ratio * seq_len
    (v_full = l + q, v_half = ratio * l + ratio^2 * q); parts stay >= 0."""
    if not full_value:
        return full_value
    quadratic = round((half_value - ratio * full_value) / (ratio * ratio - ratio))
    if quadratic <= full_value * 1e-3:
        return full_value
    quadratic = min(quadratic, full_value)
    return {"linear": full_value - quadratic, "quadratic": quadratic}


def split_quadratic(full, half, ratio):
    """Splits full's kept bytes and transients into linear and quadratic parts using half (the same
    model recorded at ratio * seq_len). Raises when the two recordings' events differ."""
    full_events, half_events = full["steps"][0]["events"], half["steps"][0]["events"]
    shape = lambda events: [e[:2] if e[0] in ("enter", "call") else e[:1] for e in events]
    if shape(full_events) != shape(half_events):
        raise ValueError("the recordings at seq_len and seq_len / 2 ran different events")
    for event, other in zip(full_events, half_events):
        if event[0] in ("enter", "call") and len(event) > 3:
            event[3] = _split(event[3], other[3] if len(other) > 3 else 0, ratio)
            if len(event) > 4:
                theirs = other[4] if len(other) > 4 else {}
                for key in ("forward_transient", "backward_transient", "input_bytes", "released_at_backward_begin"):
                    if key in event[4]:
                        event[4][key] = _split(event[4][key], theirs.get(key, 0), ratio)
        elif event[0] == "backward" and len(event) > 1:
            event[1] = _split(event[1], other[1] if len(other) > 1 else 0, ratio)
            if len(event) > 2:
                theirs = other[2] if len(other) > 2 else {}
                for key in list(event[2]):
                    event[2][key] = _split(event[2][key], theirs.get(key, 0), ratio)


# --- running a model on fake tensors --------------------------------------------------------------
@contextlib.contextmanager
def fake_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode(allow_non_fake_inputs=True):
        yield


def token_batch(torch, batch, seq_len, vocab):
    ids = torch.zeros((batch, seq_len), dtype=torch.long)
    return {"input_ids": ids, "labels": ids}


def plain_loss(model, batch):
    return model(batch["input_ids"], batch["labels"])


def hf_loss(model, batch):
    return model(**batch).loss  # the output (logits) is dropped before backward, as Trainer does


def record_once(model, batch, loss_fn, name, batch_size, seq_len, transients="model"):
    model.zero_grad(set_to_none=True)
    recording = MemoryRecording(model).run(batch, loss_fn)
    trace = build_trace(recording, name, batch_size, seq_len, transients)
    model.zero_grad(set_to_none=True)
    return trace, recording


def record(make_model, name, batch=1, seq_len=1024, vocab=None, loss_fn=plain_loss, attention="sdpa",
           transformers_version=None, how="", transients="model", hidden=None, split=True):
    """Records `make_model()` (built inside FakeTensorMode) at batch x seq_len and batch x seq_len/2
    and returns the trace dict with linear/quadratic amounts. `hidden`: the model width, for
    attention-score flops on its innermost *Attention modules (record_hf_trace.attention_flops)."""
    import torch
    import record_hf_trace

    with fake_mode():
        model = make_model()
        full, _ = record_once(model, token_batch(torch, batch, seq_len, vocab), loss_fn, name, batch, seq_len,
                              transients)
        split_note = "not split (seq_len 1)"
        if split and seq_len >= 2:
            half, _ = record_once(model, token_batch(torch, batch, seq_len // 2, vocab), loss_fn, name, batch,
                                  seq_len // 2, transients)
            split_quadratic(full, half, (seq_len // 2) / seq_len)
            split_note = f"split into linear and seq_len^2 parts by a second recording at seq_len {seq_len // 2}"
    if hidden:
        record_hf_trace.attention_flops(full, hidden, batch, seq_len)
    body = {key: full.pop(key) for key in ("modules", "params", "steps")}
    full["recorder"] = {"tool": TOOL, "torch": torch.__version__.split("+")[0],
                        "transformers": transformers_version, "attention": attention,
                        "how": (how + " " if how else "") +
                        "FakeTensorMode, one training micro-step; storages tracked per aten op (each once), "
                        "owned by the innermost module (ModTracker; in backward the module whose forward "
                        "made the autograd node); parameter gradients excluded; transients against "
                        "tools/recorders/activation_model.py's current; " + split_note}
    full.update(body)
    return full


def record_plain(config, name=None, batch=1, seq_len=None, attention="sdpa", transients="model", **overrides):
    """A tools/recorders/memory_models.py model by config name."""
    import torch
    import memory_models

    kind, fields = memory_models.CONFIGS[config]
    fields = dict(fields, **overrides)
    seq_len = seq_len or fields["context"]
    if seq_len > fields["context"]:
        overrides = dict(overrides, context=seq_len)
    make = lambda: memory_models.build(config, attention=attention, **overrides)[0]
    how = (f"tools/recorders/memory_models.py {config} ({memory_models.ROOT_TYPES[kind].__name__}, {fields['layers']} "
           f"layers, width {fields['width']}, vocab {fields['vocab']}), bf16 weights and activations, loss on "
           "f32 logits, computed in forward;")
    return record(make, name or config, batch, seq_len, fields["vocab"], plain_loss, attention, None, how,
                  transients, hidden=fields["width"])


def _masks_as_on_a_device(transformers):
    """transformers' masking_utils treats a FakeTensor as tracing (torch.export): it cannot read the
    position ids to rule out packed sequences, nor decide that sdpa may skip the mask, so it builds
    the explicit [seq, seq] causal mask that a run on a device skips (is_causal instead), which sdpa
    then keeps in every layer. The recorder's batches are plain unpacked sequences: no packing, and
    while masking_utils decides the skip, fake tensors are not tracing (only dynamo / jit count)."""
    masking = getattr(transformers, "masking_utils", None)
    decide = getattr(masking, "_ignore_causal_mask_sdpa", None)
    if decide is None or getattr(decide, "zero3_fake_is_not_tracing", False):
        return
    original_is_tracing = masking.is_tracing

    def ignore_causal_mask_sdpa(*args, **kwargs):
        masking.is_tracing = lambda tensor=None: original_is_tracing(None)
        try:
            return decide(*args, **kwargs)
        finally:
            masking.is_tracing = original_is_tracing

    ignore_causal_mask_sdpa.zero3_fake_is_not_tracing = True
    masking._ignore_causal_mask_sdpa = ignore_causal_mask_sdpa
    if hasattr(masking, "find_packed_sequence_indices"):
        masking.find_packed_sequence_indices = lambda position_ids: None


def build_hf(model_type, overrides=None, layers=None, attention="sdpa", seq2seq=False):
    """A Hugging Face model built from its config class (no weights), in bf16, in train mode."""
    import torch
    import transformers
    import transformers.masking_utils  # noqa: F401
    import record_hf_trace

    _masks_as_on_a_device(transformers)

    config = record_hf_trace.build_config(transformers, model_type, layers, overrides)
    auto = transformers.AutoModelForSeq2SeqLM if seq2seq else transformers.AutoModelForCausalLM
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        try:
            model, used = auto.from_config(config, attn_implementation=attention, dtype=torch.bfloat16), attention
        except (ValueError, ImportError):
            model, used = auto.from_config(config, attn_implementation="eager", dtype=torch.bfloat16), "eager"
    finally:
        torch.set_default_dtype(previous)
    wrong = sorted({str(p.dtype) for p in model.parameters() if p.dtype != torch.bfloat16})
    if wrong:  # model.to() cannot swap fake parameters; from_config(dtype=) should have made them bf16
        raise ValueError(f"{type(model).__name__} has parameters in {wrong}, not bf16")
    model.train()
    return model, used, config


def record_hf(model_type, name=None, batch=1, seq_len=None, overrides=None, layers=None, attention="sdpa",
              seq2seq=False, transients="model"):
    """A transformers model from its config alone (AutoConfig.for_model + overrides)."""
    import torch
    import transformers

    holder = {}

    def make():
        model, used, config = build_hf(model_type, overrides, layers, attention, seq2seq)
        holder.update(attention=used, config=config, model=type(model).__name__)
        return model

    with fake_mode():  # the config, for seq_len and vocab
        import record_hf_trace
        config = record_hf_trace.build_config(transformers, model_type, layers, overrides)
    seq_len = seq_len or getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", 1024)
    hidden = getattr(config, "hidden_size", None) or getattr(config, "d_model", None)
    trace = record(make, name or f"hf-{model_type}", batch, seq_len, config.vocab_size, hf_loss, attention,
                   transformers.__version__, "", transients, hidden=hidden)
    trace["recorder"]["attention"] = holder["attention"]
    trace["recorder"]["how"] = (f"transformers {holder['model']} from AutoConfig.for_model({model_type!r}) "
                                f"({config.num_hidden_layers} layers, hidden {hidden}, vocab {config.vocab_size}; "
                                "no weights), bf16, the model's own loss with labels = input ids; "
                                + trace["recorder"]["how"])
    return trace


# --- writing ----------------------------------------------------------------------------------------
def text(trace):
    """The trace as JSON with one module, parameter or event a line (as tools/recorders/make_model_traces.py)."""
    compact = lambda value: json.dumps(value, separators=(",", ":"))
    lines = ["{"]
    for key, value in trace.items():
        if key in ("modules", "params", "steps"):
            continue
        lines.append(f" {json.dumps(key)}: {json.dumps(value)},")
    lines.append(' "modules": [')
    lines.append(",\n".join("  " + compact(m) for m in trace["modules"]))
    lines.append(" ],")
    lines.append(' "params": [')
    lines.append(",\n".join("  " + compact(p) for p in trace["params"]))
    lines.append(" ],")
    lines.append(' "steps": [')
    steps = []
    for step in trace["steps"]:
        head = {k: v for k, v in step.items() if k != "events"}
        steps.append("  " + compact(head)[:-1] + ', "events": [\n' +
                     ",\n".join("   " + compact(e) for e in step["events"]) + "\n  ]}")
    lines.append(",\n".join(steps))
    lines.append(" ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write(trace, path):
    with open(path, "w") as out:
        out.write(text(trace))


# --- the shipped dense traces -------------------------------------------------------------------------
SHIPPED_NOTES = {
    "gpt2-124m": "GPT-2 small (Radford et al. 2019): 12 layers, width 768, 12 heads, vocab 50257, context 1024, "
                 "LM head tied to wte; one sequence of 1024 tokens per micro-step",
    "gpt3-175b": "GPT-3 175B (Brown et al. 2020, Table 2.1): 96 layers, width 12288, 96 heads, context 2048, "
                 "GPT-2 vocab 50257, LM head tied to wte; one sequence of 2048 tokens per micro-step",
    "zero-paper-7.5b": "A GPT-shaped 7.46B model (36 layers, width 4096) standing for the ZeRO paper's 7.5B example "
                       "(Rajbhandari et al. 2020, Figure 1: 1.9 GB of model states per device with stage 3 at 64 "
                       "ranks); one sequence of 1024 tokens per micro-step",
    "llama-2-7b": "Llama-2-7B shapes (Touvron et al. 2023, Table 1 / HF config): 32 layers, width 4096, 32 heads, "
                  "MLP 11008, vocab 32000, untied LM head; one sequence of 4096 tokens per micro-step",
    "t5-base": "T5-base shapes (Raffel et al. 2020 / HF t5-base config): 12+12 layers, width 768, 12 heads, FF 3072, "
               "vocab 32128. One embedding `shared` is used by the encoder, the decoder and the tied LM head "
               "(external parameters). 512 encoder and 512 decoder tokens per micro-step",
    "fp-quant-like": "A small Llama-shaped model whose linear layers are quantized in the style of the FP-Quant "
                     "integration: each keeps a zero-element `weight` placeholder next to its packed 4-bit `qweight` "
                     "(two per byte), per-group `scales` (group 32) and a one-element `global_scale`, so every layer "
                     "mixes sized, zero-sized and smaller-than-W parameters (SCENARIOS.md #1 and #2). Its forward "
                     "dequantizes each weight into bf16 before the GEMM (a transient of out x in)",
}

LLAMA_2_7B_HF = {"hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32,
                 "num_key_value_heads": 32, "num_hidden_layers": 32, "vocab_size": 32000,
                 "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
T5_BASE_HF = {"d_model": 768, "d_ff": 3072, "num_layers": 12, "num_decoder_layers": 12, "num_heads": 12,
              "d_kv": 64, "vocab_size": 32128, "feed_forward_proj": "relu", "tie_word_embeddings": True,
              "dropout_rate": 0.1, "decoder_start_token_id": 0, "pad_token_id": 0, "eos_token_id": 1}


def _have_transformers():
    try:
        import transformers  # noqa: F401
        return True
    except ImportError:
        return False


def _fp_quant_dtypes(trace):
    """The trace's dtypes for FPQuantLinear's parameters (make_model_traces.py): qweight u8 (two 4-bit
    values a byte), scales fp8, global_scale f32; the recorded module holds them in bf16 / f32."""
    for param in trace["params"]:
        leaf = param[1].rsplit(".", 1)[-1]
        want = {"qweight": "u8", "scales": "fp8", "global_scale": "f32"}.get(leaf)
        if want:
            param[3:] = [want]


def shipped(names=None, log=print):
    """{file name: trace} of the shipped dense traces, recorded. Llama-2-7B and T5-base come from
    transformers when it imports (else Llama-2-7B from tools/recorders/memory_models.py; T5 is skipped)."""
    names = names or ["gpt2-124m", "gpt3-175b", "zero-paper-7.5b", "llama-2-7b", "t5-base", "fp-quant-like"]
    hf = _have_transformers()
    traces = {}
    for name in names:
        started = time.time()
        if name == "llama-2-7b" and hf:
            trace = record_hf("llama", name, 1, 4096, overrides=LLAMA_2_7B_HF)
        elif name == "t5-base":
            if not hf:
                log("t5-base: skipped (transformers does not import here; tools/lib/diff_venv.sh installs it)")
                continue
            trace = record_hf("t5", name, 1, 512, overrides=T5_BASE_HF, seq2seq=True)
        else:
            trace = record_plain(name, name)
        if name == "fp-quant-like":
            _fp_quant_dtypes(trace)
        notes = SHIPPED_NOTES[name]
        body = {key: trace.pop(key) for key in ("recorder", "modules", "params", "steps")}
        trace["notes"] = notes
        trace.update(body)
        traces[name + ".json"] = trace
        log(f"{name}: recorded in {time.time() - started:.1f} s")
    return traces


def require_torch(tool):
    """Exits with a message unless torch >= 2.5 (ModTracker, FakeTensorMode, node metadata) imports."""
    try:
        import torch
        version = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
    except ImportError:
        version = None
    if version is None or version < (2, 5):
        sys.exit(f"{tool}: needs torch >= 2.5 (this python has {'none' if version is None else torch.__version__}); "
                 "run it with the runners' venv: source tools/lib/diff_venv.sh && zero3_install_diff_venv, "
                 "then $ZERO3_DIFF_VENV/bin/python (zero3_install_diff_venv_transformers adds transformers)")


def main(argv=None):
    require_torch("record_memory_trace.py")
    parser = argparse.ArgumentParser(description="Record a zero3 trace with measured activation memory")
    parser.add_argument("model", nargs="?", help="a config of tools/recorders/memory_models.py (" +
                        ", ".join(__import__("memory_models").CONFIGS) + ")")
    parser.add_argument("out", nargs="?", help="the trace to write")
    parser.add_argument("--hf", metavar="MODEL_TYPE", help="record a transformers model of this type instead")
    parser.add_argument("--seq2seq", action="store_true", help="with --hf: AutoModelForSeq2SeqLM (T5)")
    parser.add_argument("--config-json", metavar="FILE", help="with --hf: config fields to set")
    parser.add_argument("--layers", type=int, help="number of layers (default: the config's)")
    parser.add_argument("--batch", type=int, default=1, help="sequences per micro-step (default 1)")
    parser.add_argument("--seq-len", type=int, help="tokens per sequence (default: the model's context)")
    parser.add_argument("--attention", choices=("sdpa", "eager"), default="sdpa")
    parser.add_argument("--shipped", metavar="DIR", help="record the shipped dense traces into DIR")
    args = parser.parse_args(argv)
    if args.shipped:
        os.makedirs(args.shipped, exist_ok=True)
        for file_name, trace in shipped().items():
            path = os.path.join(args.shipped, file_name)
            write(trace, path)
            print(f"wrote {path}: {os.path.getsize(path) / 1024:.0f} KiB")
        return 0
    out = args.out or (args.model if args.hf else None)
    if not out or not (args.model or args.hf):
        parser.error("give MODEL OUT (or --hf MODEL_TYPE OUT), or --shipped DIR")
    if args.hf:
        overrides = json.load(open(args.config_json)) if args.config_json else None
        trace = record_hf(args.hf, None, args.batch, args.seq_len, overrides, args.layers, args.attention,
                          args.seq2seq)
    else:
        extra = {"layers": args.layers} if args.layers else {}
        trace = record_plain(args.model, None, args.batch, args.seq_len, args.attention, **extra)
    write(trace, out)
    print(f"wrote {out}: {len(trace['modules'])} modules, {len(trace['params'])} parameters, batch "
          f"{trace['batch']} x seq_len {trace['seq_len']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
