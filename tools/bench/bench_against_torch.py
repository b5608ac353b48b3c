#!/usr/bin/env python3
"""zero3's single-process training step (`zero3 train --backend ref`) against PyTorch's on the same
model shapes, micro-batch, optimizer (AdamW, clipping at 1.0) and thread count, measured in one
run: rounds interleaved (zero3, torch, zero3, torch, ...), and each side's step time taken by
difference, (time of 2N steps - time of N steps) / N, so that start-up, model build and the first
steps' page faults cancel. N starts at --steps and grows until N steps take at least --min-seconds
(a few steps of a tiny model are shorter than the machine's noise); t(N) and t(2N) are each the
fastest of the rounds. A difference that still comes out at or below zero is rerun, and after a
few tries is an error (exit 1), never a printed figure. torch runs at one intra-op thread with
OpenBLAS at the thread count under test, as zero3 does (torch's own pool fights OpenBLAS on small
machines), so both do their GEMMs in the same library with the same threads.

  zero3 bench step --against torch                      # what the CLI runs
  tools/bench/bench_against_torch.py build/tools/zero3 --threads 1,2 --models gpt-tiny,gpt-3m

Prints ms/step for both and zero3/torch (below 1.0: zero3 is faster) per model and thread count;
--report writes the same as JSON. Needs the system interpreter's torch (Debian's python3-torch).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

MICRO_BATCH = 4
# The shapes issue 16 measured, beside the built-ins.
GPT_SHAPES = {
    "gpt-tiny": {"vocab": 64, "context": 16, "layers": 2, "heads": 2, "width": 32},
    "gpt-3m": {"vocab": 512, "context": 128, "layers": 4, "heads": 4, "width": 256},
    "gpt-19m": {"vocab": 512, "context": 256, "layers": 6, "heads": 8, "width": 512},
}
MLP_TINY = {"input_width": 8, "widths": [32, 32, 4]}  # core/models/model_zoo.cc: linear/gelu/linear/gelu/linear
MODELS = list(GPT_SHAPES) + ["mlp-tiny"]


def model_spec_argument(name, work):
    """What `zero3 train --model` takes: a built-in name, or a spec file for the extra shapes."""
    if name in ("gpt-tiny", "mlp-tiny"):
        return name
    path = os.path.join(work, f"{name}.json")
    with open(path, "w") as file:
        json.dump({"zero3_model_spec": 1, "name": name, "kind": "gpt", **GPT_SHAPES[name]}, file)
    return path


def zero3_seconds(zero3, model, steps, threads):
    """Seconds of zero3's training loop for `steps` steps (the report's total_s, without start-up)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
        result = subprocess.run([zero3, "train", "--backend", "ref", "--model", model, "--steps", str(steps),
                                 "--micro-batch", str(MICRO_BATCH), "--log-every", str(steps), "--report",
                                 report.name], env=env, capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"bench_against_torch: zero3 train failed (exit {result.returncode}):\n{result.stderr}")
        return json.load(open(report.name))["timings"]["total_s"]


TORCH_WORKER = r'''
import json, sys, time
import torch
import torch.nn.functional as F
torch.set_num_threads(1)
shape, steps, micro_batch = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(1)


class Block(torch.nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.qkv, self.proj = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.fc, self.fc_proj = torch.nn.Linear(width, 4 * width), torch.nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / (c // self.heads) ** 0.5
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        attention = scores.masked_fill(mask, float("-inf")).softmax(-1) @ v
        x = x + self.proj(attention.transpose(1, 2).reshape(b, t, c))
        return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class Gpt(torch.nn.Module):
    """zero3's gpt kind: pre-norm GPT-2 blocks, tanh GELU, causal attention, tied head."""
    def __init__(self, s):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(s["vocab"], s["width"]), torch.nn.Embedding(s["context"], s["width"])
        self.blocks = torch.nn.ModuleList(Block(s["width"], s["heads"]) for _ in range(s["layers"]))
        self.ln_f = torch.nn.LayerNorm(s["width"])

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()


if "vocab" in shape:
    model = Gpt(shape)
    loss_of = lambda x: F.cross_entropy(model(x[:, :-1]).reshape(-1, shape["vocab"]), x[:, 1:].reshape(-1))
    batch_of = lambda: torch.randint(0, shape["vocab"], (micro_batch, shape["context"] + 1))
else:
    layers, width = [], shape["input_width"]
    for i, out in enumerate(shape["widths"]):
        last = i + 1 == len(shape["widths"])
        layers += [torch.nn.Linear(width, out)] + ([] if last else [torch.nn.GELU(approximate="tanh")])
        width = out
    model = torch.nn.Sequential(*layers)
    batch_of = lambda: torch.randn(micro_batch, shape["input_width"])
    loss_of = lambda x: F.mse_loss(model(x), torch.zeros(micro_batch, width))
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
start = time.perf_counter()
for _ in range(steps):
    optimizer.zero_grad(set_to_none=True)
    loss = loss_of(batch_of())
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    loss.item()
print(time.perf_counter() - start)
'''


def torch_seconds(python, name, steps, threads):
    shape = GPT_SHAPES.get(name, MLP_TINY)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS="1")
    result = subprocess.run([python, "-c", TORCH_WORKER, json.dumps(shape), str(steps), str(MICRO_BATCH)], env=env,
                            capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"bench_against_torch: the torch side failed (exit {result.returncode}):\n{result.stderr[-2000:]}")
    return float(result.stdout.strip().splitlines()[-1])


def calibrated_steps(run, steps, min_seconds):
    """N from `steps` up, so that N steps take at least min_seconds."""
    for _ in range(12):
        seconds = run(steps)
        if seconds >= min_seconds:
            return steps
        steps = max(steps + 1, int(steps * 1.25 * min_seconds / max(seconds, 1e-6)))
    return steps


def step_seconds(runners, steps, rounds, name, tries=4):
    """Seconds per step of each side: the fastest t(2N) minus the fastest t(N), over N, rounds
    interleaved across the sides. Noise larger than the step time is rerun, then an error."""
    for _ in range(tries):
        fastest = {(side, n): float("inf") for side in runners for n in (steps[side], 2 * steps[side])}
        for _ in range(rounds):
            for side, run in runners.items():
                for n in (steps[side], 2 * steps[side]):
                    fastest[(side, n)] = min(fastest[(side, n)], run(n))
        per_step = {side: (fastest[(side, 2 * steps[side])] - fastest[(side, steps[side])]) / steps[side]
                    for side in runners}
        if min(per_step.values()) > 0:
            return per_step
    sys.exit(f"bench_against_torch: {name}: t(2N) - t(N) stayed at or below zero in {tries} tries "
             f"({per_step}); the machine is too noisy for these step counts: raise --min-seconds")


class Parser(argparse.ArgumentParser):
    def error(self, message):  # a usage error is exit 1 in zero3, not argparse's 2
        self.print_usage(sys.stderr)
        sys.exit(f"bench_against_torch: error: {message}")


def main():
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("zero3", help="the zero3 binary")
    parser.add_argument("--python", default="/usr/bin/python3", help="an interpreter with torch (Debian's)")
    parser.add_argument("--models", default="gpt-tiny,gpt-3m,gpt-19m,mlp-tiny", help=f"from {', '.join(MODELS)}")
    parser.add_argument("--threads", default="1,2", help="OpenBLAS thread counts, comma-separated")
    parser.add_argument("--steps", type=int, default=0, help="the smallest N (timed N and 2N steps); default by model")
    parser.add_argument("--min-seconds", type=float, default=0.25, help="N grows until N steps take this long")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--report", help="write the figures as JSON here")
    args = parser.parse_args()
    models = args.models.split(",")
    unknown = [name for name in models if name not in MODELS]
    if unknown:
        parser.error(f"unknown model {unknown} (known: {', '.join(MODELS)})")
    if args.rounds < 1 or args.steps < 0 or not args.min_seconds > 0:
        parser.error("want --rounds >= 1, --steps >= 0 and --min-seconds > 0")
    threads = [int(t) for t in args.threads.split(",")]
    default_steps = {"gpt-tiny": 40, "mlp-tiny": 200, "gpt-3m": 8, "gpt-19m": 3}
    print(f"bench step --against torch: micro-batch {MICRO_BATCH}, rounds {args.rounds} interleaved, "
          f"step time = (t(2N) - t(N)) / N with N steps >= {args.min_seconds} s, fastest round; "
          f"torch {args.python}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for name in models:
            model = model_spec_argument(name, work)
            for thread_count in threads:
                runners = {"zero3": lambda n: zero3_seconds(args.zero3, model, n, thread_count),
                           "torch": lambda n: torch_seconds(args.python, name, n, thread_count)}
                steps = {side: calibrated_steps(run, args.steps or default_steps[name], args.min_seconds)
                         for side, run in runners.items()}
                per_step = step_seconds(runners, steps, args.rounds, name)
                row = {"model": name, "threads": thread_count, "zero3_steps": steps["zero3"],
                       "torch_steps": steps["torch"], "zero3_ms": 1e3 * per_step["zero3"],
                       "torch_ms": 1e3 * per_step["torch"],
                       "ratio_zero3_over_torch": per_step["zero3"] / per_step["torch"]}
                rows.append(row)
                # Four significant digits: a tiny model's step is hundredths of a millisecond, where
                # a fixed three decimals would leave the times too coarse to give the ratio.
                print(f"{name:9} threads {thread_count}: zero3 {row['zero3_ms']:9.4g} ms/step  torch "
                      f"{row['torch_ms']:9.4g} ms/step  zero3/torch {row['ratio_zero3_over_torch']:.3f}", flush=True)
    if args.report:
        tmp = args.report + ".tmp"
        with open(tmp, "w") as file:
            json.dump({"micro_batch": MICRO_BATCH, "rounds": args.rounds, "rows": rows}, file, indent=1)
        os.replace(tmp, args.report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
