"""Comparing the two sides: relative differences of losses and gradient norms, and the final
weights' difference as a fraction of how far training moved them."""
from zero3py.oracle.settings import GPT


def compared(name, tensor):
    """The elements compared, flat: all but the key third of a c_attn bias (module docstring)."""
    flat = tensor.reshape(-1).clone()
    if name.endswith("attn.c_attn.bias"):
        flat[GPT["width"]:2 * GPT["width"]] = 0
    return flat


def weight_errors(ours, theirs, initial):
    """name -> ||zero3 - torch|| / (||torch - initial|| + 1e-6 sqrt(numel)): the difference as a
    fraction of how far training moved the tensor; or a string when the two cannot be compared."""
    if set(ours) != set(theirs):
        return (f"tensor names differ: torch only {sorted(set(ours) - set(theirs))}, "
                f"zero3 only {sorted(set(theirs) - set(ours))}")
    errors = {}
    for name, mine in ours.items():
        if tuple(mine.shape) != tuple(theirs[name].shape):
            return f"{name}: zero3 shape {tuple(theirs[name].shape)}, torch {tuple(mine.shape)}"
        if mine.numel():
            mine_flat, start = compared(name, mine), compared(name, initial[name])
            moved = float((mine_flat - start).norm()) + 1e-6 * mine.numel() ** 0.5
            errors[name] = float((compared(name, theirs[name]) - mine_flat).norm()) / moved
    return errors


def relative(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def weight_summary(errors, limit):
    """(first tensor over the limit or None, the worst tensor, its error)."""
    over = [name for name, error in errors.items() if error > limit]
    worst = max(errors, key=errors.get, default=None)
    return (over[0] if over else None), worst, errors.get(worst, 0.0)
