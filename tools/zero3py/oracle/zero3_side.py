"""The zero3 side of the oracle: running the binary (a failed command is a RuntimeError with its
output's tail), its training runs and their consolidated weights, and the checks of what it wrote
that need no torch training: the report's settings, the token batches it read, the GPT-2 logits."""
import json
import os
import subprocess

import torch

from zero3py.oracle.settings import CONFIG, GAS, MICRO, SEED, STEPS, WORLD, hyperparameters
from zero3py.safetensors_io import read_safetensors


def zero3(binary, *args):
    result = subprocess.run([binary, *map(str, args)], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"zero3 {' '.join(map(str, args))}: exit {result.returncode}\n"
                           f"{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return result.stdout


def check_report(report, backend, hyper, bf16):
    """The run used the settings the torch side mirrors; the sim run really sharded parameters."""
    cfg = report["config"]
    seen = {"micro": cfg["train_micro_batch_size_per_gpu"], "gas": cfg["gradient_accumulation_steps"],
            "bf16": cfg["bf16"]["enabled"], **hyperparameters(cfg)}
    wanted = {"micro": MICRO, "gas": GAS, "bf16": bf16, **hyper}
    if backend == "sim":
        zero = cfg["zero_optimization"]
        seen.update(stage=zero["stage"], persistence=zero["stage3_param_persistence_threshold"],
                    gathers=report.get("collectives", {}).get("all_gather", {}).get("count", 0) > 0)
        wanted.update(stage=3, persistence=0, gathers=True)
    problems = [f"report {k} = {seen[k]}, expected {v}" for k, v in wanted.items() if seen[k] != v]
    if len(report["losses"]) != STEPS:
        problems.append(f"report has {len(report['losses'])} losses for {STEPS} steps")
    return problems


def check_dumped_tokens(binary, work, flags, batches):
    """zero3's own batches of the token file (inspect --dump-data) equal our llm.c reading."""
    dump = os.path.join(work, "token-batches.safetensors")
    zero3(binary, "inspect", "gpt-tiny", "--seed", SEED, "--dump-data", dump, "--steps", STEPS, "--gas", GAS,
          "--micro-batch", MICRO, "--ranks", WORLD, "--data", flags[flags.index("--data") + 1])
    data = read_safetensors(dump)
    for s in range(STEPS):
        for m in range(GAS):
            for what, ours in zip(("inputs", "targets"), batches[s][m]):
                if not torch.equal(data[f"step{s}.micro{m}.{what}"].long(), ours.long()):
                    return [f"token batch step {s} micro {m} {what}: zero3's differs from llm.c's DataLoader"]
    return []


def train_zero3(binary, work, backend, name, flags, bf16):
    """One `zero3 train` run: (its report, its consolidated weights name -> f32 tensor, their
    safetensors metadata)."""
    config = os.path.join(work, "ds_config.json")
    with open(config, "w") as out:
        json.dump(CONFIG, out)
    report, checkpoint = os.path.join(work, f"{backend}.json"), os.path.join(work, f"{backend}-ck")
    weights = os.path.join(work, f"{backend}.safetensors")
    zero3(binary, "train", "--backend", backend, "--ranks", WORLD, *(["--zero", "3"] if backend == "sim" else []),
          "--model", name, "--steps", STEPS, "--seed", SEED, "--gas", GAS, "--micro-batch", MICRO,
          "--config", config, *flags, *(["--bf16"] if bf16 else []), "--log-every", STEPS,
          "--report", report, "--save-checkpoint", checkpoint)
    zero3(binary, "consolidate", checkpoint, weights, "--format", "safetensors",
          *(["--names", "hf-gpt2"] if name == "gpt-tiny" else []))
    metadata = {}
    tensors = read_safetensors(weights, metadata)
    with open(report) as file:
        return json.load(file), tensors, metadata


def check_logits(binary, work, flags, model):
    """zero3's GPT-2 is GPT-2: its logits for the initial HF weights on the first micro-batch's
    tokens (`zero3 inspect --dump-logits`) equal GPT2LMHeadModel's within 1e-5 of their scale."""
    path = os.path.join(work, "logits.safetensors")
    zero3(binary, "inspect", "gpt-tiny", "--seed", SEED, "--dump-logits", path, "--micro-batch", MICRO,
          "--ranks", WORLD, *flags)
    dumped = read_safetensors(path)
    with torch.no_grad():
        theirs = model(input_ids=dumped["inputs"].long()).logits.float()
    ours = dumped["logits"].float()
    if ours.shape != theirs.shape:
        return [f"logits: shape {tuple(ours.shape)} vs HF {tuple(theirs.shape)}"]
    difference = (ours - theirs).abs().max().item()
    scale = max(1.0, theirs.abs().max().item())
    print(f"   forward check: logits max |zero3 - HF GPT-2| {difference:.2e} (scale {scale:.2f}, tolerance 1e-5 of it)")
    return [] if difference <= 1e-5 * scale else [f"logits differ from HF GPT-2 by {difference:.2e} (scale {scale:.2f})"]
