"""The replay's activation accounting, as a reference for `zero3 replay` (traces/FORMAT.md): what it
holds in the `activation` category for one micro-step of a trace written by
tools/recorders/record_memory_trace.py, and the peak of that. The C++ replay implements exactly these rules;
tools/recorders/memory_oracle_test.py checks them against torch's MemTracker.

Amounts, per invocation M (an `enter` or `call` event; a `call` is an enter and an exit at once):
  kept(M)   ACTIVATION_BYTES: what M's own ops made in forward that is still alive when backward
            starts (what autograd keeps);
  ft(M)     forward_transient, bt(M) backward_transient (below);
  input(M)  input_bytes: M's tensor inputs that require grad (what a checkpointed M holds), each
            storage once and not if an earlier invocation of the same module type with the same
            parent took it as input (T5's decoder blocks share one position bias);
  early(M)  released_at_backward_begin: the part of kept(M) that autograd frees before any child
            of M starts its backward (M's own saved tensors used first in backward: the loss's
            log-probabilities in a model that computes its loss in forward). Written only for
            invocations with children (for a leaf it changes nothing); 0 when absent.
The `backward` event has kept(L), ft(L), bt(L), early(L) for the ops outside every module (the
loss; early(L): what the loss's own backward frees). Amounts rescale to the replayed micro-batch B
and sequence S: a number or {"linear": a, "quadratic": q} is a * r + q * r * S / seq_len with
r = B * S / (batch * seq_len); output_bytes is a number (linear).

Rules (current and peak start at 0; after every change, peak = max(peak, current)):
  forward, in event order:
    exit of M:      peak = max(peak, current + ft(M)); current += kept(M)
                    if M is checkpointed (its type or name is in the set, no ancestor is):
                    current -= kept of every invocation in M's subtree (M's own included);
                    current += input(M)
    backward event: peak = max(peak, current + ft(L)); current += kept(L)
  backward, the tape in reverse (M's backward begins at the reverse position of its exit and ends
  at the reverse position of its enter):
    start:          peak = max(peak, current + bt(L)); current -= early(L)
    M begins:       if M is checkpointed, its forward runs again first: for each invocation N of
                    M's subtree in forward order of exits, peak = max(peak, current + ft(N));
                    current += kept(N);
                    then peak = max(peak, current + bt(M)); current -= early(M)
    M ends:         current -= kept(M) - early(M); if M is checkpointed, current -= input(M)
    end:            current -= kept(L) - early(L)
The transients are recorded relative to this model's `current` at the point where they are
applied (ft at M's exit before kept(M) is added, bt at M's backward begin), so for the recorded
shape without checkpointing the peak is exactly the recorded peak of live activation bytes.
"""


def amount(value, linear_scale=1.0, quadratic_scale=1.0):
    """A number or {"linear": a, "quadratic": q} at the replayed shape."""
    if value is None:
        return 0.0
    if isinstance(value, dict):
        return value.get("linear", 0) * linear_scale + value.get("quadratic", 0) * quadratic_scale
    return value * linear_scale


class Invocation:
    __slots__ = ("name", "type", "kept", "ft", "bt", "input", "early", "children")

    def __init__(self, name, type_, kept=0.0, ft=0.0, bt=0.0, input_bytes=0.0, early=0.0):
        self.name, self.type = name, type_
        self.kept, self.ft, self.bt, self.input, self.early = kept, ft, bt, input_bytes, early
        self.children = []


def scales(trace, micro_batch=None, seq_len=None):
    """(linear, quadratic) factors from the trace's recorded batch and seq_len to the replayed ones."""
    batch0, seq0 = trace.get("batch"), trace.get("seq_len")
    if not batch0 or not seq0:
        return 1.0, 1.0
    batch, seq = micro_batch or batch0, seq_len or seq0
    linear = (batch * seq) / (batch0 * seq0)
    return linear, linear * seq / seq0


def first_micro_step(trace):
    """The events of the first step's first micro-step, up to and including its `backward` event."""
    events = []
    for event in trace["steps"][0]["events"]:
        if isinstance(event, dict):
            raise ValueError("rank-divergent traces are not modelled here")
        events.append(event)
        if event[0] == "backward":
            return events
    raise ValueError("the first step has no backward event")


def parse(trace, micro_batch=None, seq_len=None):
    """(top-level invocations, the loss as an Invocation) of the trace's first micro-step, amounts
    rescaled to `micro_batch` x `seq_len` (default: as recorded)."""
    linear, quadratic = scales(trace, micro_batch, seq_len)
    types = dict((m[0], m[1]) for m in trace["modules"])
    roots, stack, loss = [], [], None
    for event in first_micro_step(trace):
        kind = event[0]
        if kind in ("enter", "call"):
            options = event[4] if len(event) > 4 else {}
            node = Invocation(event[1], types.get(event[1], ""),
                              amount(event[3] if len(event) > 3 else 0, linear, quadratic),
                              amount(options.get("forward_transient"), linear, quadratic),
                              amount(options.get("backward_transient"), linear, quadratic),
                              amount(options.get("input_bytes"), linear, quadratic),
                              amount(options.get("released_at_backward_begin"), linear, quadratic))
            (stack[-1].children if stack else roots).append(node)
            if kind == "enter":
                stack.append(node)
        elif kind == "exit":
            stack.pop()
        elif kind == "backward":
            options = event[2] if len(event) > 2 else {}
            loss = Invocation("", "", amount(event[1] if len(event) > 1 else 0, linear, quadratic),
                              amount(options.get("forward_transient"), linear, quadratic),
                              amount(options.get("backward_transient"), linear, quadratic),
                              early=amount(options.get("released_at_backward_begin"), linear, quadratic))
    return roots, loss


def _subtree(node):
    """node's invocations in forward order of their exits (children first)."""
    for child in node.children:
        yield from _subtree(child)
    yield node


def walk(roots, loss, checkpoint=(), probe=None):
    """The activation peak in bytes under the rules above. `checkpoint`: module types or names whose
    outermost invocations are checkpointed. `probe(where, node, current)` is called at each point
    where a transient applies ("forward" at an exit, "backward" at a backward begin, "loss_forward",
    "loss_backward"), before it is applied: the recorder uses it to record transients relative to
    `current`."""
    checkpoint = set(checkpoint)
    state = {"current": 0.0, "peak": 0.0}

    def apply(transient, where, node):
        if probe:
            probe(where, node, state["current"])
        state["peak"] = max(state["peak"], state["current"] + transient)

    def add(delta):
        state["current"] += delta
        state["peak"] = max(state["peak"], state["current"])

    def is_checkpointed(node):
        return node.type in checkpoint or node.name in checkpoint

    checkpointed = set()  # ids of the outermost checkpointed invocations

    def mark(node, inside):
        hit = not inside and is_checkpointed(node)
        if hit:
            checkpointed.add(id(node))
        for child in node.children:
            mark(child, inside or hit)

    def forward(node):
        for child in node.children:
            forward(child)
        apply(node.ft, "forward", node)
        add(node.kept)
        if id(node) in checkpointed:
            add(-sum(n.kept for n in _subtree(node)))
            add(node.input)

    for root in roots:
        mark(root, False)
        forward(root)
    apply(loss.ft, "loss_forward", loss)
    add(loss.kept)
    apply(loss.bt, "loss_backward", loss)
    add(-loss.early)

    def backward(node):
        if id(node) in checkpointed:
            for inner in _subtree(node):
                apply(inner.ft, "recompute", inner)
                add(inner.kept)
        apply(node.bt, "backward", node)
        add(-node.early)
        for child in reversed(node.children):
            backward(child)
        add(-(node.kept - node.early))
        if id(node) in checkpointed:
            add(-node.input)

    for root in reversed(roots):
        backward(root)
    add(-(loss.kept - loss.early))
    return state["peak"]


def activation_peak(trace, micro_batch=None, seq_len=None, checkpoint=()):
    """The replay's activation peak (bytes) for one micro-step of `trace` (a dict) at `micro_batch` x
    `seq_len` with the modules `checkpoint` names (types or names) checkpointed."""
    roots, loss = parse(trace, micro_batch, seq_len)
    if loss is None:
        raise ValueError("no backward event")
    return walk(roots, loss, checkpoint)
