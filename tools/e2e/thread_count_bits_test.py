#!/usr/bin/env python3
"""The CPU kernels give the same bits at 1 and 2 threads: zero3 train --backend ref with
OPENBLAS_NUM_THREADS and OMP_NUM_THREADS at 1 and then 2, for a gpt (every kernel of a
transformer step, AVX2 clones included where the CPU has AVX2) and an MLP, bf16 on and off; the
final optimizer-state hash (weights and AdamW moments), every loss and every gradient norm must
agree."""
import json
import os
import subprocess
import sys
import tempfile

zero3 = sys.argv[1]
GPT = {"zero3_model_spec": 1, "name": "gpt-threads", "kind": "gpt", "vocab": 256, "context": 64, "layers": 2,
       "heads": 2, "width": 128}  # GEMMs large enough for OpenBLAS to split them across threads
failures = []


def run(model, threads, extra):
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
        result = subprocess.run([zero3, "train", "--backend", "ref", "--model", model, "--steps", "6", "--log-every",
                                 "1", "--report", report.name, *extra], env=env, capture_output=True, text=True,
                                timeout=300)
        if result.returncode != 0:
            failures.append(f"{model} {extra} at {threads} threads: exit {result.returncode}\n{result.stderr}")
            return None
        data = json.load(open(report.name))
        return data["final_state_hash"], data["losses"], data["grad_norms"]


with tempfile.TemporaryDirectory() as work:
    gpt_path = os.path.join(work, "gpt.json")
    with open(gpt_path, "w") as file:
        json.dump(GPT, file)
    for model in (gpt_path, "mlp-tiny"):
        for extra in ([], ["--bf16"]):
            one, two = run(model, 1, extra), run(model, 2, extra)
            if one and two and one != two:
                failures.append(f"{os.path.basename(model)} {extra}: 1 thread {one} vs 2 threads {two}")

for failure in failures:
    print("FAIL " + failure)
print(f"thread_count_bits_test: {len(failures)} failures")
sys.exit(1 if failures else 0)
