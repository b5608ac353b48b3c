"""bf16 training as zero3 trains it (PROTOCOL.md, "bf16"; the outside oracle's oracle/torch_side.py
train_torch): f32 master weights (the init file's values), a bf16 compute copy of the model whose
parameters are refreshed from the masters before each step, each backward's gradients widened to
f32 and accumulated in f32, then divided by gas; the norm and clipping over those f32 gradients,
and torch.optim.AdamW on the masters. The final weights are the masters.

    weights = MasterWeights(model)        # casts the model to bf16, keeps its f32 masters
    weights.refresh_()                    # masters -> the bf16 compute parameters (rounded)
    weights.accumulate_(weights.take_gradients())

The twin computes as zero3 does in bf16 (torch_layers.operand): a feature model, fed f32 inputs,
computes in f32 on bf16-rounded weights and gets bf16-rounded weight gradients; a token model is
bf16 from its embedding on. The torch control (targets.py) trains with the same MasterWeights and
f32_average_hook, and mixed_precision_reference is the runner's reference in bf16
(training.reference_run). DeepSpeed's and FSDP2's mixed precision: deepspeed_bf16.py, targets.bf16_policy.
"""
import numpy as np
import torch
import torch.distributed as dist

from zero3py.runners.training import (backward, build_case_model, final_weights, finish_gradients, make_optimizer,
                                      train_steps)

COMPUTE_DTYPE = torch.bfloat16


class MasterWeights:
    """A model's f32 master weights, every parameter's (frozen ones too: they never change), and
    the model itself cast to bf16 as their compute copy (in place: a Parameter kept elsewhere, as
    a raw_scale's cached reference, sees the bf16 values too, as it does under zero3)."""

    def __init__(self, model):
        self.masters = {name: torch.nn.Parameter(p.detach().float().clone(), requires_grad=p.requires_grad)
                        for name, p in model.named_parameters()}
        model.to(COMPUTE_DTYPE)
        self.compute = dict(model.named_parameters())

    def trainable(self):
        return [m for m in self.masters.values() if m.requires_grad]

    def refresh_(self):
        """The compute copy from the masters, rounded to bf16 (before each step, as zero3 casts)."""
        with torch.no_grad():
            for name, param in self.compute.items():
                param.copy_(self.masters[name])

    def take_gradients(self):
        """The compute copy's gradients widened to f32 (name -> tensor; none where no gradient
        came), cleared for the next backward, so that nothing accumulates in bf16."""
        taken = {}
        for name, param in self.compute.items():
            if param.grad is not None:
                taken[name] = param.grad.float()
                param.grad = None
        return taken

    def accumulate_(self, gradients, scale=1.0):
        """Adds f32 gradients (x scale, an f32 factor as zero3's 1/W) to the masters' .grad."""
        for name, grad in gradients.items():
            master = self.masters[name]
            grad = grad * float(np.float32(scale)) if scale != 1.0 else grad
            master.grad = grad.clone() if master.grad is None else master.grad.add_(grad)

    def weights(self):
        return final_weights(self.masters.items())


def finish_mixed_gradients(case):
    """The step's f32 gradients as zero3 has them before AdamW: the micro-steps' sum x f32(1/gas),
    then finish_gradients (a missing one zero, the norm, clipping). -> the norm."""
    finish = finish_gradients(case)

    def run(params):
        if case.gas != 1:
            for p in params:
                if p.grad is not None:
                    p.grad.mul_(float(np.float32(1.0 / case.gas)))
        return finish(params)
    return run


def sum_gradients(total, gradients):
    """total += gradients (name -> f32 tensor), in place, in call order (the all-reduce's rank order)."""
    for name, grad in gradients.items():
        total[name] = grad if name not in total else total[name].add_(grad)
    return total


def mixed_precision_reference(case, rank_order=False):
    """training.reference_run in bf16: the global batch of all W ranks per micro-step in one
    forward and backward (its gradient widened to f32 and accumulated); with `rank_order`, each
    rank's B rows their own forward and backward, the gradients widened to f32, summed in rank
    order and x f32(1/W): the frameworks' order of sums (zero3's accumulate_average).
    -> (losses, norms, the final master weights)."""
    model = build_case_model(case)
    weights = MasterWeights(model)
    params = weights.trainable()
    rows = case.micro_batch

    def micro_step(step, micro):
        if micro == 0:
            weights.refresh_()
        inputs, targets = case.global_batch(step, micro)
        if not rank_order:
            loss, reported = model.loss(inputs, targets)
            backward(loss)
            weights.accumulate_(weights.take_gradients())
            return reported
        summed, total = {}, 0.0
        for rank in range(case.world):
            loss, reported = model.loss(inputs[rank * rows:(rank + 1) * rows], targets[rank * rows:(rank + 1) * rows])
            backward(loss)
            sum_gradients(summed, weights.take_gradients())
            total += reported
        weights.accumulate_(summed, 1.0 / case.world)
        return total / case.world

    losses, norms = train_steps(case, params, make_optimizer(case, params), micro_step,
                                finish_mixed_gradients(case))
    return losses, norms, weights.weights()


def f32_average_hook(averaged, bucket):
    """A DDP communication hook that averages as zero3 does in bf16: the bucket's bf16 gradients
    widened to f32, summed over the ranks in f32 and x f32(1/W), each parameter's average kept in
    `averaged` (id(parameter) -> f32 tensor) for its master. DDP's own hook would divide by W and sum
    in bf16, rounding every partial sum to 8 bits. DDP still gets the average (rounded to bf16) for
    its .grad, which the control does not read. The bucket's buffer holds its parameters'
    gradients one after another, in bucket.parameters() order."""
    world = dist.get_world_size()

    def keep(future):
        mean = future.value()[0].mul_(float(np.float32(1.0 / world)))
        offset = 0
        for param in bucket.parameters():
            averaged[id(param)] = mean[offset:offset + param.numel()].view_as(param).clone()
            offset += param.numel()
        return bucket.buffer().copy_(mean)
    return dist.all_reduce(bucket.buffer().float(), async_op=True).get_future().then(keep)
