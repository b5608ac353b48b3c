"""Training in torch as zero3 trains: the same AdamW, gradient accumulation and averaging over
ranks, clipping by zero3's canonical gradient norm, and the reported loss (the oracle's docstring,
"What the torch side mirrors", lists each with its zero3 source)."""
import numpy as np
import torch

from zero3py.oracle.settings import GAS, STEPS, f32


def grad_norm(accum, ranks):
    """zero3's canonical norm: per rank the squares of its shard of every gradient (ceil(numel/W)
    elements from r * that) summed in double and rounded to f32, the partials added in f32."""
    total = np.float32(0)
    for r in range(ranks):
        partial = 0.0
        for a in accum.values():
            size = -(-a.numel() // ranks)
            partial += float(a.reshape(-1)[r * size:(r + 1) * size].double().square().sum())
        total = np.float32(total + np.float32(partial))
    return float(np.sqrt(total))


def train_torch(model, batches, hyper, bf16, ranks=1, permute_rows=False):
    """Trains as zero3 does with `ranks` data-parallel ranks, each taking its consecutive rows of
    the global batch: 1 mirrors the single-process reference, W the sim's DDP / ZeRO-3 ranks
    (each rank's gradient rounded to the compute dtype on its own, then averaged in f32)."""
    dtype = torch.bfloat16 if bf16 else torch.float32
    masters = {n: torch.nn.Parameter(p.detach().float().clone()) for n, p in model.named_parameters()}
    model.to(dtype)
    params = dict(model.named_parameters())  # a tied weight once
    optimizer = torch.optim.AdamW(masters.values(), lr=hyper["lr"], betas=hyper["betas"], eps=hyper["eps"],
                                  weight_decay=hyper["weight_decay"], foreach=False)
    generator = torch.Generator().manual_seed(1)
    losses, norms = [], []
    for step in range(STEPS):
        with torch.no_grad():
            for n, p in params.items():
                p.copy_(masters[n])  # the compute copy (rounded to bf16)
        accum = {n: torch.zeros_like(m) for n, m in masters.items()}
        rank_losses = [[] for _ in range(ranks)]
        for micro in range(GAS):
            x, y = batches[step][micro]
            if permute_rows:  # the same math summed in another order: the rounding-noise twin
                order = torch.randperm(x.shape[0], generator=generator)
                x, y = x[order], y[order]
            summed = {n: torch.zeros_like(m) for n, m in masters.items()}
            rows = x.shape[0] // ranks
            for r in range(ranks):
                model.zero_grad(set_to_none=True)
                loss, reported = model.loss(x[r * rows:(r + 1) * rows], y[r * rows:(r + 1) * rows])
                loss.backward()
                rank_losses[r].append(reported)
                for n, p in params.items():
                    if p.grad is not None:  # widened to f32, summed in rank order (the all-reduce)
                        summed[n] += p.grad.float()
            for n in accum:
                accum[n] += summed[n] * f32(1.0 / ranks)
        if GAS != 1:
            for a in accum.values():
                a.mul_(f32(1.0 / GAS))
        norm = grad_norm(accum, ranks)
        max_norm = hyper["gradient_clipping"]
        clip = 1.0
        if max_norm > 0 and norm > max_norm:
            clip = f32(np.float32(max_norm) / (np.float32(norm) + np.float32(1e-6)))
        for n, m in masters.items():
            m.grad = accum[n] if clip == 1.0 else accum[n] * clip
        optimizer.step()
        if ranks == 1:  # the reference: the double mean of its micro-step losses
            losses.append(sum(rank_losses[0]) / GAS)
        else:  # each rank's mean in f32, summed over ranks in f32, / W
            total = np.float32(0)
            for micro_losses in rank_losses:
                total = np.float32(total + np.float32(sum(micro_losses) / GAS))
            losses.append(float(total) / ranks)
        norms.append(norm)
    return losses, norms, {n: m.detach() for n, m in masters.items()}
