"""A runner's ok answer judged: the framework's run against the runner's own unsharded reference,
step by step (loss, gradient norm) and at the end (every weight, as a fraction of how far
training moved it: zero3py.oracle.compare.weight_errors). Tolerances per dtype (TOLERANCE): f32
as the outside oracle's, which measured torch against zero3; here the torch control against its
reference at world 2 and 4 on the built-in sequential models differs by <= 1e-7 in losses and
norms and <= 1e-5 of the update in weights (tools/e2e/runner_test.py prints the worst it sees), so a
framework that is 100x off that is a finding, and a wrong lr of 1% is still caught.

bf16 as the C++ judge's (props/target/target_verdict.cc target_tolerance: the outside oracle's bf16
class), each widened, as that judge widens it, by SPREAD_MARGIN times the order_probe's own distance
from the reference (the case's rounding spread: in bf16 of the tolerance's order on an
ill-conditioned case, where f32's is far below it). Measured (PROTOCOL.md, "Tolerances"): the
torch control, DeepSpeed and FSDP2 off the reference by no more than the order_probe is, loss
<= 2.7e-3 (the reference reports a token model's loss rounded to bf16, as zero3 does), norm <= 2.1e-3,
weights <= 5e-3 of the update but on ill-conditioned cases, where the order_probe moves as far."""
from zero3py.oracle.compare import relative, weight_errors
from zero3py.safetensors_io import read_safetensors

TOLERANCE = {"f32": {"loss": 1e-5, "grad_norm": 1e-3, "weights": 1e-3},
             "bf16": {"loss": 1e-2, "grad_norm": 5e-2, "weights": 0.3}}
SPREAD_MARGIN = 10  # the C++ judge's kSpreadMargin
WIDENED = ("bf16",)  # the dtypes judged with the order_probe's spread added (f32 is judged plain here)


def spread_of(answer, initial, dtype):
    """(per step |probe - ref| of the losses and of the norms, per tensor the probe's weight error)
    x SPREAD_MARGIN, or zeros when the dtype is judged plain or the case has no order_probe (W = 1)."""
    ref, probe = answer["reference"], answer["reference"].get("order_probe")
    if dtype not in WIDENED or not probe:
        return [0.0] * len(ref["losses"]), [0.0] * len(ref["grad_norms"]), {}
    losses = [SPREAD_MARGIN * abs(a - b) for a, b in zip(probe["losses"], ref["losses"])]
    norms = [SPREAD_MARGIN * abs(a - b) for a, b in zip(probe["grad_norms"], ref["grad_norms"])]
    errors = weight_errors(read_safetensors(ref["weights"]), read_safetensors(probe["weights"]), initial)
    return losses, norms, ({n: SPREAD_MARGIN * e for n, e in errors.items()} if isinstance(errors, dict) else {})


def differences(answer, initial, dtype="f32"):
    """(the worst relative loss, norm and weight differences, the first breach as a sentence or
    None). `initial` is the case's init weights (name -> tensor)."""
    tol = TOLERANCE[dtype]
    ours, ref = answer["framework"], answer["reference"]
    loss_spread, norm_spread, weight_spread = spread_of(answer, initial, dtype)
    losses = [relative(a, b) for a, b in zip(ours["losses"], ref["losses"])]
    norms = [relative(a, b) for a, b in zip(ours["grad_norms"], ref["grad_norms"])]
    errors = weight_errors(read_safetensors(ref["weights"]), read_safetensors(ours["weights"]), initial)
    if isinstance(errors, str):
        return (max(losses), max(norms), float("inf")), f"final weights: {errors}"
    worst = (max(losses, default=0.0), max(norms, default=0.0), max(errors.values(), default=0.0))
    for step, (a, b) in enumerate(zip(ours["losses"], ref["losses"])):
        norm, ref_norm = ours["grad_norms"][step], ref["grad_norms"][step]
        if not (abs(a - b) <= tol["loss"] * max(abs(b), 1e-12) + loss_spread[step] and
                abs(norm - ref_norm) <= tol["grad_norm"] * abs(ref_norm) + norm_spread[step]):
            return worst, (f"step {step}: loss {a!r} vs reference {b!r}, grad norm {norm!r} vs {ref_norm!r}")
    over = [name for name, error in errors.items() if error > max(tol["weights"], weight_spread.get(name, 0.0))]
    return worst, (f"final weights: {over[0]} differs by {errors[over[0]]:.1e} of its update" if over else None)
