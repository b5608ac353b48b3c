"""One oracle case, a model x dtype end to end (run_case: torch trained as the ref and the sim
backends, torch's own rounding noise, zero3's two runs, the step-by-step and final comparisons),
its inputs (prepare: initial weights, data, zero3's flags), and the self-check of the safetensors
writer and reader against the safetensors package."""
import os

import numpy as np
import torch

from zero3py.oracle.compare import relative, weight_errors, weight_summary
from zero3py.oracle.data import llmc_global_batch, read_token_file, write_token_file
from zero3py.oracle.models import make_model, model_spec, spec_problems
from zero3py.oracle.settings import (CONFIG, GAS, GPT, INPUT_WIDTH, MICRO, SEED, STEPS, TOLERANCE, WORLD,
                                     hyperparameters)
from zero3py.oracle.torch_side import train_torch
from zero3py.oracle.zero3_side import check_dumped_tokens, check_logits, check_report, train_zero3, zero3
from zero3py.safetensors_io import read_safetensors, write_safetensors
from zero3py.torch_model import named_tensors


def prepare(name, bf16, work, binary):
    """Initial weights file, zero3 --init-from flags, and per step the GAS global batches."""
    model = make_model(name, bf16)
    init = os.path.join(work, "init.safetensors")
    tensors = named_tensors(model)  # gpt: with lm_head.weight, tied (zero3 must accept it equal to wte)
    flags = ["--init-from", init]
    if name == "gpt-tiny":
        flags += ["--names", "hf-gpt2"]
        rng = np.random.default_rng(SEED)
        span = WORLD * MICRO * GPT["context"]
        tokens = np.zeros(7 * span + 1 + 37, np.int64)  # 7 windows: 40 micro-steps wrap the epoch
        for i in range(1, len(tokens)):  # a learnable chain, so the loss actually moves
            tokens[i] = (5 * tokens[i - 1] + rng.integers(0, 4)) % GPT["vocab"]
        path = os.path.join(work, "tokens.bin")
        write_token_file(path, tokens)
        flags += ["--data", path]
        read = read_token_file(path)
        batches = [[llmc_global_batch(read, s * GAS + m, MICRO, GPT["context"], WORLD) for m in range(GAS)]
                   for s in range(STEPS)]
    elif binary:
        dump = os.path.join(work, "data.safetensors")
        zero3(binary, "inspect", name, "--seed", SEED, "--dump-data", dump, "--steps", STEPS, "--gas", GAS,
              "--micro-batch", MICRO, "--ranks", WORLD)
        data = read_safetensors(dump)
        batches = [[(data[f"step{s}.micro{m}.inputs"], data[f"step{s}.micro{m}.targets"]) for m in range(GAS)]
                   for s in range(STEPS)]
    else:  # --torch-only: any data of the right shapes
        gen = torch.Generator().manual_seed(SEED)
        rows = WORLD * MICRO
        target = (lambda: torch.randint(0, model.out_width, (rows,), generator=gen).float()) \
            if model.loss_kind == "cross_entropy" else (lambda: torch.randn(rows, model.out_width, generator=gen))
        if getattr(model, "tokens", False):
            steps = model_spec(name)["context"]
            ids = lambda: torch.randint(0, model.out_width, (rows, steps), generator=gen).float()  # noqa: E731
            batches = [[(ids(), ids()) for _ in range(GAS)] for _ in range(STEPS)]
        else:
            batches = [[(torch.randn(rows, INPUT_WIDTH, generator=gen), target()) for _ in range(GAS)]
                       for _ in range(STEPS)]
    write_safetensors(init, tensors, {"format": "pt"})
    return model, flags, batches


def run_case(name, bf16, binary, work):
    """Trains one model x dtype in torch and (unless binary is None) in zero3; returns failures."""
    dtype = "bf16" if bf16 else "f32"
    activations_bf16 = name == "gpt-tiny" or "vocab" in model_spec(name)  # token ids in: bf16 rows from the table
    tol = TOLERANCE["f32" if not bf16 else "bf16" if activations_bf16 else "bf16-weights"]
    hyper = hyperparameters(CONFIG)
    model, flags, batches = prepare(name, bf16, work, binary)
    initial = {n: p.detach().float().clone() for n, p in model.named_parameters()}
    failures = []
    if name == "gpt-tiny" and binary:
        failures += check_dumped_tokens(binary, work, flags, batches)
        if not bf16:
            failures += check_logits(binary, work, flags, model)
    # The backends' torch twins: the global batch in one process (ref), and W ranks (sim).
    torch_runs = {"ref": train_torch(model, batches, hyper, bf16),
                  "sim": train_torch(make_model(name, bf16), batches, hyper, bf16, ranks=WORLD)}
    t_losses, t_norms, t_weights = torch_runs["ref"]
    # torch's own rounding noise: the same math with every batch's rows in another order.
    n_losses, n_norms, n_weights = train_torch(make_model(name, bf16), batches, hyper, bf16, permute_rows=True)
    noise = weight_summary(weight_errors(t_weights, n_weights, initial), 0)[2]
    clipped = sum(n > hyper["gradient_clipping"] for n in t_norms)
    print(f"== {name} {dtype}: torch loss {t_losses[0]:.6f} -> {t_losses[-1]:.6f}, {clipped} steps clipped; "
          f"torch's own rounding noise (rows permuted): loss {max(map(relative, n_losses, t_losses)):.1e}, "
          f"grad norm {max(map(relative, n_norms, t_norms)):.1e}, weights {noise:.1e} (tolerances {tol['loss']:g}, "
          f"{tol['grad_norm']:g}, {tol['weights']:g})")
    if not binary:
        return [f"{name} {dtype}: {f}" for f in failures]
    runs = {backend: train_zero3(binary, work, backend, name, flags, bf16) for backend in ("ref", "sim")}
    failures += spec_problems(name, runs["ref"][2])
    for backend, (report, _, _) in runs.items():
        failures += [f"{backend}: {p}" for p in check_report(report, backend, hyper, bf16)]
    if failures:
        return [f"{name} {dtype}: {f}" for f in failures]
    print("   step  torch loss   loss rel: ref     sim    grad-norm rel: ref     sim")
    for step in range(STEPS):
        cells = []
        for backend, (report, _, _) in runs.items():
            loss, norm = report["losses"][step], report["grad_norms"][step]
            t_loss, t_norm = torch_runs[backend][0][step], torch_runs[backend][1][step]
            loss_rel, norm_rel = relative(loss, t_loss), relative(norm, t_norm)
            cells.append((loss_rel, norm_rel))
            first = not any(f.startswith(backend + ": step") for f in failures)
            if first and (loss_rel > tol["loss"] or norm_rel > tol["grad_norm"]):
                failures.append(f"{backend}: step {step} is the first to differ: loss {loss!r} vs torch {t_loss!r} "
                                f"(rel {loss_rel:.1e}), grad norm {norm!r} vs torch {t_norm!r} (rel {norm_rel:.1e})")
        print(f"   {step:4d}  {t_losses[step]:10.7f}  {cells[0][0]:9.1e} {cells[1][0]:8.1e}  "
              f"{cells[0][1]:15.1e} {cells[1][1]:8.1e}")
    if name == "gpt-tiny":  # step 0's loss is a function of HF's logits for the same weights and tokens
        print(f"   forward check: step-0 loss zero3 {runs['ref'][0]['losses'][0]!r} vs HF GPT-2 {t_losses[0]!r}")
    for backend, (_, weights, _) in runs.items():
        errors = weight_errors(torch_runs[backend][2], weights, initial)
        if isinstance(errors, str):
            failures.append(f"{backend}: final weights: {errors}")
            continue
        first, worst, error = weight_summary(errors, tol["weights"])
        print(f"   {backend}: final weights differ by at most {error:.1e} of their update ({worst})")
        if first:
            failures.append(f"{backend}: final weights: {first} differs by {errors[first]:.1e} of its update "
                            f"(tolerance {tol['weights']:g}; first such tensor in parameter order)")
    return [f"{name} {dtype}: {f}" for f in failures]


def self_check_files(work):
    """Our safetensors writer/reader against the safetensors package when it is installed."""
    path = os.path.join(work, "roundtrip.safetensors")
    tensors = {"a": torch.randn(3, 4), "empty": torch.zeros(0, 8), "b": torch.randn(5)}
    write_safetensors(path, tensors, {"format": "pt"})
    back = read_safetensors(path)
    failures = [f"own safetensors round trip: {n}" for n in tensors if not torch.equal(tensors[n], back[n])]
    try:
        from safetensors.torch import load_file, save_file
    except ImportError:
        print("safetensors package not installed: own writer checked against own reader only")
        return failures
    theirs = load_file(path)
    failures += [f"safetensors package reads {n} differently" for n in tensors
                 if not torch.equal(tensors[n], theirs[n])]
    bf16 = {"w": torch.randn(4, 3).to(torch.bfloat16)}
    save_file(bf16, path)
    if not torch.equal(read_safetensors(path)["w"], bf16["w"].float()):
        failures.append("own reader widens BF16 wrongly")
    return failures
