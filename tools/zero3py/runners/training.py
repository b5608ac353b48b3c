"""What every runner's training shares: the case's model built by zero3py.torch_model with its
initial weights, the pinned AdamW, the gradient conventions zero3 has (a trainable parameter that
got no gradient takes a zero one, so weight decay still moves it), and the reference run: one
process, the global batch, the same torch kernels (PROTOCOL.md, "The reference run")."""
import math

import torch

from zero3py.runners.memory import steps
from zero3py.safetensors_io import write_safetensors
from zero3py.torch_model import build_model, load_tensors_


class Unsupported(Exception):
    """A case setting this runner cannot express (not a finding: the answer's status is unsupported)."""


class TrainingLoss(torch.nn.Module):
    """model(x, y) -> the loss, as frameworks that wrap a module want forward to return it; the
    spec's model is the child `model`, so its parameter names get the prefix `model.`."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, y):
        return self.model.loss(x, y)[0]


def build_case_model(case):
    """The case's torch model with init.safetensors loaded, in f32 (seeded first: the builder draws
    an init that load_tensors_ then overwrites, and a seeded draw keeps even that deterministic).
    A bf16 case's caller casts it as its framework does (mixed_precision.MasterWeights)."""
    torch.manual_seed(case.seed)
    model = build_model(case.model, bf16=case.dtype == "bf16", raw_access=case.torch["raw_access"],
                        raw_gradient=case.torch["raw_gradient"])
    load_tensors_(model, case.init)
    return model


def make_optimizer(case, params):
    """torch.optim.AdamW with every setting from the case; single-tensor, as zero3's per-tensor loop."""
    hyper = case.optimizer
    if not hyper["bias_correction"]:
        raise Unsupported("bias_correction false: torch.optim.AdamW always corrects")
    return torch.optim.AdamW(params, lr=hyper["lr"], betas=tuple(hyper["betas"]), eps=hyper["eps"],
                             weight_decay=hyper["weight_decay"], foreach=False)


def trainable(model):
    return [p for p in model.parameters() if p.requires_grad]


def fill_missing_grads_(params):
    """zero3's convention (and ZeRO's flat partitions'): a trainable parameter no micro-step used has
    a zero gradient, so AdamW's weight decay and moments still step it; torch would skip it."""
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)


def clip_and_norm_(params, max_norm):
    """The global L2 norm of the gradients before clipping, and clipping as torch, DeepSpeed and
    zero3 do it: x max / (norm + 1e-6) when the norm exceeds max (0 disables clipping)."""
    norm = math.sqrt(sum(float(p.grad.double().square().sum()) for p in params))
    if max_norm > 0 and norm > max_norm:
        for p in params:
            p.grad.mul_(max_norm / (norm + 1e-6))
    return norm


def finish_gradients(case):
    """The step's gradients as zero3 has them before AdamW: missing ones zero, then clipped; -> the norm."""
    def finish(params):
        fill_missing_grads_(params)
        return clip_and_norm_(params, case.gradient_clipping)
    return finish


def backward(loss, run_backward=None):
    """loss.backward(), or `run_backward(loss)` (DeepSpeed's engine.backward); nothing when no
    trainable parameter reaches the loss (every path frozen or unused), which torch refuses to
    differentiate: a user skips that backward, and zero3 leaves those gradients zero too."""
    if loss.requires_grad:
        (run_backward or torch.Tensor.backward)(loss)


def train_steps(case, params, optimizer, micro_step, finish=None, step_loss=float):
    """The loop every run shares. Per step: gradients zeroed; micro_step(step, micro) runs forward
    and the backward of loss / gas and returns the micro-step's reported loss; finish(params) (by
    default finish_gradients) returns the norm; the optimizer steps; the step's loss is
    step_loss(the mean of its micro-step losses). Returns (losses, norms)."""
    finish = finish or finish_gradients(case)
    losses, norms = [], []
    for step in steps(case):  # range(case.steps), each step's memory measured when the case asks
        optimizer.zero_grad(set_to_none=True)
        micro_losses = [micro_step(step, micro) for micro in range(case.gas)]
        norms.append(finish(params))
        optimizer.step()
        losses.append(step_loss(sum(micro_losses) / case.gas))
    return losses, norms


def final_weights(named_params, prefix=""):
    """zero3 name -> f32 copy, `prefix` (a wrapper's) removed."""
    return {name[len(prefix):]: p.detach().float().clone() for name, p in named_params if name.startswith(prefix)}


def reference_run(case, out_path, rank_order=False, dtype=torch.float32):
    """The unsharded reference: the global batch of W ranks in one process; per micro-step the mean
    loss over its rows (the mean of the ranks' means, as every rank has B rows) / gas, gradients
    accumulated; the step's loss is the mean of its micro-step losses. Returns losses, norms and
    writes the final weights to out_path. With `rank_order`, each rank's B rows get their own
    forward and a backward of loss / (gas W): the same math summed in the frameworks' order, whose
    distance from the plain run is the case's rounding spread on these kernels (PROTOCOL.md). With
    `dtype` float64, the model, data and optimizer compute in float64: the exact run that tells
    which of two f32 runs rounding moved, and how far (PROTOCOL.md, `float64`). A bf16 case's f32
    run is zero3's mixed precision (mixed_precision.py); its float64 run stays float64 throughout."""
    if case.dtype == "bf16" and dtype == torch.float32:
        from zero3py.runners.mixed_precision import mixed_precision_reference  # it builds on this module
        losses, norms, weights = mixed_precision_reference(case, rank_order)
        write_safetensors(out_path, weights)
        return {"losses": losses, "grad_norms": norms, "weights": out_path}
    model = build_case_model(case).to(dtype)
    params = trainable(model)

    def micro_step(step, micro):
        inputs, targets = (t.to(dtype) if t.is_floating_point() else t for t in case.global_batch(step, micro))
        if not rank_order:
            loss, reported = model.loss(inputs, targets)
            backward(loss / case.gas)
            return reported
        rows, total = case.micro_batch, 0.0
        for rank in range(case.world):
            loss, reported = model.loss(inputs[rank * rows:(rank + 1) * rows], targets[rank * rows:(rank + 1) * rows])
            backward(loss / (case.gas * case.world))
            total += reported
        return total / case.world

    losses, norms = train_steps(case, params, make_optimizer(case, params), micro_step)
    write_safetensors(out_path, final_weights(model.named_parameters()))
    return {"losses": losses, "grad_norms": norms, "weights": out_path}
