"""Each rank's tensor memory per optimizer step, when the case asks (case.json `measure_memory`,
PROTOCOL.md "Memory"): `peak_bytes`, the peak during the step (forward, backward, the gradients'
reduction, the optimizer step) of the bytes of live CPU tensor storages, and `held_bytes`, the
live bytes when the step has ended (what it leaves held for the next one). A framework that keeps
a tensor per step (a leak) makes both grow by its size every step; healthy training's stop
growing at the second step, once the optimizer's state exists.

    TARGETS = {name: measured(train) for name, train in ...}   # targets.py: answers carry them
    for step in steps(case): ...                                # each target's training loop

What is counted (LiveStorages, a TorchDispatchMode): every storage that an op dispatched under the
mode returns as a new tensor, from the moment the first step starts, by its bytes, until it is freed
(a weak reference's callback) or resized (aten's resize_, and UntypedStorage.resize_, with which
FSDP2 frees and re-allocates its unsharded parameters). Tensors allocated before the first step
(the model's initial parameters, the data) are not counted, nor are views of them: the numbers
are what training adds, so a framework's own state appears at the step that creates it. DTensor
ops are let through to their local ops, which are counted. Tensors a C++ library allocates outside
the dispatcher (gloo's own buffers) are not seen: a collective's temporaries, not state.

Why not torch.distributed._tools.mem_tracker.MemTracker (measured with torch 2.15): it raises
NotImplementedError ("multiple iterative calls") when the root module runs forward twice in one
session (gas > 1, or a second step without reset_mod_stats()), it counts each view of a storage
from before it started (the batch rows x[rows] of the data) as a new allocation, which grows by a
batch per step, and its overhead measured 4-7x this mode's (it updates every live module's peak on every op).
Not process RSS: the allocator keeps and reuses freed pages, so RSS moves by pages, not tensors.
"""
import functools
import os
import threading
import weakref

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook
from torch.utils._python_dispatch import TorchDispatchMode

# Test-only (tools/e2e/runner_test_memory.py): a rank started with this variable set to a positive
# integer N leaks on purpose: before every optimizer step it keeps N clones of the first gradient
# that optimizer holds (DeepSpeed's: its flat partition's), in a list that lives until the case
# ends. A campaign never sets it.
LEAK_ENV = "ZERO3_RUNNER_TEST_LEAK"

_active = None  # the Meter of the case this rank trains, while measured() runs it
_ALIASES = {}  # OpOverload -> one bool per schema return: does it alias an argument (a view, in-place, out=)


def measure_memory(case):
    return bool(case.settings.get("measure_memory", False))


class LiveStorages(TorchDispatchMode):
    """`live`: the bytes of the live storages that ops under the mode returned; `peak`: the
    highest `live` since reset_peak(). Its cost is the dispatch mode's own (one Python call per
    op, about 15 us on this machine), the counting adds next to nothing."""

    def __init__(self):
        super().__init__()
        self.live = self.peak = 0
        self.sizes = {}  # id(storage) -> (weak reference, bytes counted)
        # A storage can die in a gloo worker thread (a collective's work releasing its tensors),
        # whose weak-reference callback then races the main thread's counting. Reentrant: a
        # garbage collection inside a critical section can free a storage on the same thread.
        self.lock = threading.RLock()
        self.resize = self.dtensor = None

    def reset_peak(self):
        self.peak = self.live

    def _count(self, key, storage, size):
        with self.lock:
            entry = self.sizes.get(key)
            if entry is None:
                self.sizes[key] = (weakref.ref(storage, functools.partial(self._freed, key)), size)
                self.live += size
            elif entry[1] != size:  # resized
                self.sizes[key] = (entry[0], size)
                self.live += size - entry[1]
            if self.live > self.peak:
                self.peak = self.live

    def _freed(self, key, _):
        with self.lock:
            entry = self.sizes.pop(key, None)
            if entry is not None:
                self.live -= entry[1]

    def track(self, tensor, alias):
        try:
            storage = tensor.untyped_storage()
        except (RuntimeError, NotImplementedError, TypeError):  # a wrapper subclass without a storage
            return
        key = id(storage)
        entry = self.sizes.get(key)
        if entry is None and alias:  # a view of (or an in-place op on) a storage from before the mode
            return
        size = storage.nbytes()
        if entry is None or entry[1] != size:
            self._count(key, storage, size)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.dtensor is not None and self.dtensor in types:
            return NotImplemented  # DTensor desugars into its local ops, which come back here
        out = func(*args, **(kwargs or {}))
        aliases = _ALIASES.get(func)
        if aliases is None:
            aliases = _ALIASES[func] = tuple(r.alias_info is not None for r in func._schema.returns) or (False,)
        if isinstance(out, torch.Tensor):
            self.track(out, aliases[0])
        elif isinstance(out, (tuple, list)):
            for index, item in enumerate(out):  # a Tensor[] (split, unbind) is one schema return
                if isinstance(item, torch.Tensor):
                    self.track(item, aliases[min(index, len(aliases) - 1)])
        return out

    def __enter__(self):
        try:
            from torch.distributed.tensor import DTensor
            self.dtensor = DTensor
        except ImportError:
            self.dtensor = None
        original = self.resize = torch.UntypedStorage.resize_

        @functools.wraps(original)
        def resize_(storage, size):  # not an op, so the mode does not see it: FSDP2's free and re-allocation
            result = original(storage, size)
            if id(storage) in self.sizes:
                self._count(id(storage), storage, storage.nbytes())
            return result
        torch.UntypedStorage.resize_ = resize_
        return super().__enter__()

    def __exit__(self, *exc):
        torch.UntypedStorage.resize_ = self.resize
        result = super().__exit__(*exc)
        with self.lock:
            self.sizes.clear()  # the weak references (and their callbacks) go with them
        return result


class Meter:
    """One case's measurement on one rank: the mode entered when the first step starts and left
    after the last (or by close(), when training raised); one peak and one held count per step."""

    def __init__(self):
        self.mode, self.hook, self.peaks, self.held, self.leaked = None, None, [], [], []
        self.leak = int(os.environ.get(LEAK_ENV, "0") or 0)

    def begin_step(self):
        if self.mode is None:
            self.mode = LiveStorages()
            self.mode.__enter__()
            if self.leak > 0:
                self.hook = register_optimizer_step_pre_hook(self._leak)
        self.mode.reset_peak()

    def end_step(self, last):
        self.peaks.append(int(self.mode.peak))
        self.held.append(int(self.mode.live))
        if last:
            self.close()

    def _leak(self, optimizer, args, kwargs):
        """Test-only (LEAK_ENV): what a leaking framework does, inside the step, under the mode."""
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        if grads:
            self.leaked.extend(grads[0].detach().clone() for _ in range(self.leak))

    def close(self):
        if self.hook is not None:
            self.hook.remove()
            self.hook = None
        if self.mode is not None:
            self.mode.__exit__(None, None, None)
            self.mode = None
        self.leaked.clear()


def steps(case):
    """range(case.steps), each step measured while measured() runs a case that asks for memory."""
    meter = _active
    for step in range(case.steps):
        if meter is not None:
            meter.begin_step()
        yield step
        if meter is not None:
            meter.end_step(step == case.steps - 1)


def measured(train):
    """A target's train function whose result carries this rank's `peak_bytes` and `held_bytes`
    (one int per step each) when the case asks for memory; otherwise it is train unchanged."""
    @functools.wraps(train)
    def run(case, rank, world, weights_path):
        global _active
        if not measure_memory(case):
            return train(case, rank, world, weights_path)
        meter = _active = Meter()
        try:
            result = train(case, rank, world, weights_path)
        finally:
            _active = None
            meter.close()  # the mode is left even when training raised: the rank trains the next case
        return {**result, "peak_bytes": meter.peaks, "held_bytes": meter.held}
    return run


# The judging rule's reference (the C++ judge mirrors it; PROTOCOL.md "Memory"). A healthy rank's
# held bytes are flat to the byte from the second step (index 1) on, once AdamW's moments and the
# framework's lazily built buffers exist; its peaks wobble upward by up to one collective's bucket
# when gloo's worker thread releases it late, so the peaks alone cannot tell a small leak.
SETTLED_STEP = 1
MIN_STEPS = SETTLED_STEP + 3  # at least two step-over-step comparisons after the settled step


def memory_growth(peak_bytes, held_bytes):
    """(rank, [held[s] - held[s-1] for s after the settled step]) for the first rank whose held
    bytes grow at every step after the settled one while its peak at the last step is above the
    settled step's; None when no rank's do, or the case has fewer than MIN_STEPS steps."""
    for rank, (peaks, held) in enumerate(zip(peak_bytes, held_bytes)):
        if len(held) < MIN_STEPS:
            return None
        growth = [held[s] - held[s - 1] for s in range(SETTLED_STEP + 1, len(held))]
        if all(grew > 0 for grew in growth) and peaks[-1] > peaks[SETTLED_STEP]:
            return rank, growth
    return None
