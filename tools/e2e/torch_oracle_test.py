#!/usr/bin/env python3
"""The outside oracle: the same model, initial weights and data trained in PyTorch (torch.nn,
torch.optim.AdamW; Hugging Face GPT2LMHeadModel for gpt-tiny) and by `zero3 train`, compared step
by step (losses, gradient norms) and at the end (every f32 master weight).

    /usr/bin/python3 tools/e2e/torch_oracle_test.py build/tools/zero3 [--models gpt-tiny,mlp-tiny] [--dtypes f32]
    /usr/bin/python3 tools/e2e/torch_oracle_test.py --torch-only    # no zero3: the torch side and the file formats

Debian's interpreter has python3-torch; gpt-tiny also needs `transformers`, which
tools/lib/oracle_venv.sh installs into a venv over the system packages (this script re-executes
itself under that venv's python when transformers is missing). Per model and dtype:
`zero3 train --backend ref --ranks 4` (the global batch of 4 ranks in one process) and
`--backend sim --ranks 4 --zero 3` with every parameter sharded (persistence threshold 0), both
--init-from the torch model's initial weights (gpt: under HF GPT-2's names, --names hf-gpt2), on
the same data: for gpt an llm.c token file read here as llm.c's DataLoader reads it (and checked
against `zero3 inspect --dump-data`), for the sequential models the teacher batches that dump writes.

What the torch side mirrors (zero3 source in brackets):
  * AdamW = torch.optim.AdamW (single-tensor), one group, weight decay on EVERY parameter
    [core/training/optimizer.cc adamw_coefficients, core/tensor/cpu_kernels_elementwise.cc adamw];
    hyperparameters as the f32 values zero3 holds [core/training/train_config.h AdamWHyper].
  * gradients: per micro-step each rank's gradient widened to f32, summed over ranks in rank order,
    x f32(1/W), added to an f32 accumulator; after the last micro-step x f32(1/GAS)
    [optimizer.cc accumulate_average, finish_accumulation]. Loss: the mean over the micro-batch's
    rows (all B*T positions for gpt); a step's loss is the double mean of its micro-step losses
    (sim: each rank's mean rounded to f32, summed in f32, / W) [replicated_trainer.cc mean_loss,
    core/zero3/zero3_step.cc].
  * clipping: per rank the squares of its shard of every gradient summed in double and rounded to
    f32, partials added in f32, sqrt; clip = max / (norm + 1e-6) only when norm > max
    [replicated_trainer.cc global_grad_norm, optimizer.cc clip_coefficient].
  * bf16: f32 masters, cast to bf16 compute copies before each step; every op rounds its output to
    bf16, but an op with any f32 operand computes in f32 [core/autograd/ops.cc promote]. So gpt is
    bf16 end to end (the loss value too), while the sequential models, fed f32 inputs, compute in
    f32 on bf16-rounded weights and get bf16-rounded weight gradients. Torch does the same: HF
    GPT-2 in bf16 (cross-entropy of the bf16 logits computed in f32, its value rounded to bf16, as
    zero3's kernel does), the sequential layers' bf16 parameters used through .float().

Tolerances (TOLERANCE; measured on this model set, seed 7, 20 steps). Both sides round differently
(BLAS vs ATen summation order; zero3 accumulates layer norm, softmax and cross-entropy in double),
so the script also prints torch's own spread when only the row order of every batch is permuted.
f32: loss <= 1e-5 relative, grad norm <= 1e-4; final weights: ||zero3 - torch|| <= 1e-3 of the
tensor's update ||torch - initial||. Seen: losses ~1e-7, weights <= 1e-5 of the update; a 1% lr
change, no weight decay, no clipping or beta2 0.999 each fail by steps 1-9, and swapping q and k
or two heads in the init file fails step 0 (perturb_ makes attention far from uniform). bf16, sequential
(bf16 weights, f32 activations): loss 1e-5, grad norm 1e-3, weights 1e-2; seen: <= 1e-5 of the
update. bf16, gpt: both round every activation to 8 bits, not at identical points (HF's addmm,
the attention mask, ATen's bf16 kernels), so the runs part at bf16 resolution: loss 1e-2 (about
one bf16 ulp of the loss), grad norm 5e-2, weights 0.3 of the update; seen: 6e-4, 2e-2, 0.12,
with torch's own permuted-rows spread at 0.12 as well. That is a coarse check: it does not see a
1% lr change. The key third of each c_attn bias is never compared: its gradient is zero in exact
arithmetic (softmax ignores a per-row constant), so both Adams normalize rounding noise into
steps of about lr in random directions; it changes no output.

This script is the command line; the oracle itself is in tools/zero3py/oracle/ (the package beside
this script), its torch models built by tools/zero3py/torch_model.py from zero3 model specs.

Exit 0 when everything matches, 1 otherwise; the last line says which.
"""
import argparse
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: zero3py
from zero3py.oracle.case import run_case, self_check_files  # noqa: E402
from zero3py.oracle.settings import MODELS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Where tools/lib/oracle_venv.sh installs transformers (its ZERO3_ORACLE_VENV).
VENV = os.environ.get("ZERO3_ORACLE_VENV", os.path.join(ROOT, "build", "oracle-venv"))
VENV_PYTHON = os.path.join(VENV, "bin", "python")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("zero3", nargs="?", help="path to the zero3 binary")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of " + ",".join(MODELS))
    parser.add_argument("--dtypes", default="f32,bf16")
    parser.add_argument("--torch-only", action="store_true", help="no zero3: train the torch side, check the files")
    args = parser.parse_args()
    models = args.models.split(",")
    unknown = [m for m in models if m not in MODELS] + [d for d in args.dtypes.split(",") if d not in ("f32", "bf16")]
    if unknown or (not args.zero3 and not args.torch_only):
        parser.error(f"unknown models or dtypes {unknown}" if unknown else "give the zero3 binary or --torch-only")
    if args.zero3 and not os.access(args.zero3, os.X_OK):
        parser.error(f"{args.zero3} is not an executable (build it first: tools/test builds build/tools/zero3)")
    if "gpt-tiny" in models:
        try:
            import transformers  # noqa: F401
        except ImportError:
            if os.path.exists(VENV_PYTHON) and os.path.realpath(sys.prefix) != os.path.realpath(VENV):
                os.execv(VENV_PYTHON, [VENV_PYTHON] + sys.argv)  # the same interpreter, with the venv's packages
            sys.exit("transformers is missing: source tools/lib/oracle_venv.sh and run zero3_install_oracle_venv")
    torch.set_num_threads(1)  # determinism of ATen's reductions; the models are tiny
    failures = []
    with tempfile.TemporaryDirectory(prefix="zero3-oracle-") as work:
        failures += self_check_files(work)
        for name in models:
            for dtype in args.dtypes.split(","):
                case = os.path.join(work, f"{name}-{dtype}")
                os.makedirs(case)
                try:
                    failures += run_case(name, dtype == "bf16", None if args.torch_only else args.zero3, case)
                except (RuntimeError, KeyError, ValueError) as error:  # a failed run, or a report without a key
                    failures.append(f"{name} {dtype}: {type(error).__name__}: {error}")
    for failure in failures:
        print("FAIL", failure)
    cases = len(models) * len(args.dtypes.split(","))
    print(f"torch oracle: {'FAILED' if failures else 'passed'}: {cases} model x dtype cases, "
          f"{len(failures)} failures{' (torch side only)' if args.torch_only else ''}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
