"""A runner's ok answer judged: the framework's run against the runner's own unsharded reference,
step by step (loss, gradient norm) and at the end (every weight, as a fraction of how far
training moved it: zero3py.oracle.compare.weight_errors). Tolerances per dtype (TOLERANCE): f32
as the outside oracle's, which measured torch against zero3; here the torch control against its
reference at world 2 and 4 on the built-in sequential models differs by <= 1e-7 in losses and
norms and <= 1e-5 of the update in weights (tools/e2e/runner_test.py prints the worst it sees), so a
framework that is 100x off that is a finding, and a wrong lr of 1% is still caught."""
from zero3py.oracle.compare import relative, weight_errors
from zero3py.safetensors_io import read_safetensors

TOLERANCE = {"f32": {"loss": 1e-5, "grad_norm": 1e-3, "weights": 1e-3}}


def differences(answer, initial, dtype="f32"):
    """(the worst relative loss, norm and weight differences, the first breach as a sentence or
    None). `initial` is the case's init weights (name -> tensor)."""
    tol = TOLERANCE[dtype]
    ours, ref = answer["framework"], answer["reference"]
    losses = [relative(a, b) for a, b in zip(ours["losses"], ref["losses"])]
    norms = [relative(a, b) for a, b in zip(ours["grad_norms"], ref["grad_norms"])]
    errors = weight_errors(read_safetensors(ref["weights"]), read_safetensors(ours["weights"]), initial)
    if isinstance(errors, str):
        return (max(losses), max(norms), float("inf")), f"final weights: {errors}"
    worst = (max(losses, default=0.0), max(norms, default=0.0), max(errors.values(), default=0.0))
    for step, (loss, norm) in enumerate(zip(losses, norms)):
        if loss > tol["loss"] or norm > tol["grad_norm"]:
            return worst, (f"step {step}: loss {ours['losses'][step]!r} vs reference {ref['losses'][step]!r}, "
                           f"grad norm {ours['grad_norms'][step]!r} vs {ref['grad_norms'][step]!r}")
    over = [name for name, error in errors.items() if error > tol["weights"]]
    return worst, (f"final weights: {over[0]} differs by {errors[over[0]]:.1e} of its update" if over else None)
