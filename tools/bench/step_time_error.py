#!/usr/bin/env python3
"""Replay's predicted step time against measured `mpirun -np W zero3 train --backend mpi` runs.

For each configuration (model, W, levers): calibrate the machine for that model and W
(`zero3 bench calibrate --backend mpi`, once per pair), record the model's trace in the simulator
(`zero3 train --record`), replay it with the calibrated profile (`zero3 replay --hardware`), train
it under mpirun with `--report` (measured_phases), and print per phase the predicted and measured
seconds of the steady-state step and the error (predicted - measured) / measured. The measured
figure is the median over the steps after the first two; the predicted one is replay's last step.

    tools/bench/step_time_error.py build/tools/zero3 --out step_time_error.json [--limit N]

Exit 0 with the table; the targets (median |error| <= 10 %, worst <= 25 %) are reported, not
enforced: the README's table says where the model stands.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
PHASES = ["step", "forward", "backward", "recompute", "optimizer"]


def spec(folder, name, width, layers, heads, vocab=1024, context=64):
    path = os.path.join(folder, name + ".json")
    with open(path, "w") as file:
        json.dump({"zero3_model_spec": 1, "name": name, "kind": "gpt", "vocab": vocab, "context": context,
                   "layers": layers, "heads": heads, "width": width}, file)
    return path


def configurations(folder, limit):
    """(name, model path, world, lever flags): built-in and generated GPTs, W 1-4, levers, groups."""
    mid = spec(folder, "gpt-w256-l4", 256, 4, 4)
    wide = spec(folder, "gpt-w384-l2", 384, 2, 6)
    narrow = spec(folder, "gpt-w128-l6", 128, 6, 4, vocab=512, context=128)
    configs = []
    for model in (mid, wide, narrow):
        for world in (1, 2, 4):
            configs.append((model, world, []))
    configs += [(mid, 2, ["--zero", "1"]), (mid, 2, ["--zero", "2"]),
                (mid, 2, ["--checkpoint-activations", "transformer_block"]),
                (mid, 4, ["--checkpoint-activations", "transformer_block"]),
                (mid, 2, ["--offload-optimizer", "cpu"]),
                (mid, 2, ["--offload-optimizer", "cpu", "--offload-param", "cpu"]),
                (mid, 4, ["--shard-group", "2"]), (mid, 4, ["--hpz", "2"]),
                (wide, 4, ["--zero", "2"]), (narrow, 4, ["--checkpoint-activations", "transformer_block"]),
                (narrow, 2, ["--gas", "2"])]
    return configs[:limit] if limit else configs


def run(command, **kwargs):
    result = subprocess.run(command, env=ENV, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"step_time_error: {' '.join(command)} exited {result.returncode}:\n{result.stderr[-3000:]}")
    return result


def calibrate(zero3, mpiexec, folder, model, world, cache):
    key = (model, world)
    if key not in cache:
        path = os.path.join(folder, f"profile-{os.path.basename(model)}-{world}.json")
        run([mpiexec, "--oversubscribe", "-np", str(world), zero3, "bench", "calibrate", "--backend", "mpi",
             "--model", model, "--out", path])
        cache[key] = path
    return cache[key]


def replay_flags(levers):
    """The train flags replay takes under the same names (--gas included)."""
    return list(levers)


def predicted(zero3, folder, model, world, levers, profile):
    trace = os.path.join(folder, "trace.json")
    report = os.path.join(folder, "replay.json")
    run([zero3, "train", "--backend", "sim", "--model", model, "--ranks", str(world), "--steps", "2",
         "--record", trace])
    run([zero3, "replay", trace, "--ranks", str(world), "--hardware", profile, "--no-fit-advice",
         "--report", report] + replay_flags(levers))
    with open(report) as file:
        last = json.load(file)["time"]["steps"][-1]
    return {"step": last["duration_s"], "forward": last["forward_s"], "backward": last["backward_s"],
            "recompute": last["recompute_s"], "optimizer": last["optimizer_s"],
            "communication_not_hidden": last["exposed_communication_s"], "offload": last["offload_s"]}


def measured(zero3, mpiexec, folder, model, world, levers, steps):
    report = os.path.join(folder, "train.json")
    run([mpiexec, "--oversubscribe", "-np", str(world), zero3, "train", "--backend", "mpi", "--model", model,
         "--steps", str(steps), "--report", report] + levers)
    with open(report) as file:
        phases = json.load(file)["measured_phases"][2:]
    median = lambda key: statistics.median(entry[key] for entry in phases)
    return {"step": median("step_s"), "forward": median("forward_s"), "backward": median("backward_s"),
            "recompute": median("recompute_s"), "optimizer": median("optimizer_s"),
            "communication_not_hidden": median("communication_wait_s"), "offload": median("offload_s")}


def error(p, m):
    return (p - m) / m if m > 0 else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("zero3")
    parser.add_argument("--mpiexec", default=shutil.which("mpiexec") or "mpiexec")
    parser.add_argument("--steps", type=int, default=10, help="measured steps per run (the first two are dropped)")
    parser.add_argument("--out", help="write every row as JSON here")
    parser.add_argument("--limit", type=int, default=0, help="only the first N configurations (CI runs 2)")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="zero3_step_time_")
    rows, cache = [], {}
    try:
        configs = configurations(folder, args.limit)
        for index, (model, world, levers) in enumerate(configs):
            name = f"{os.path.basename(model)[:-5]} W={world} {' '.join(levers)}".strip()
            profile = calibrate(args.zero3, args.mpiexec, folder, model, world, cache)
            p = predicted(args.zero3, folder, model, world, levers, profile)
            m = measured(args.zero3, args.mpiexec, folder, model, world, levers, args.steps)
            rows.append({"config": name, "predicted": p, "measured": m,
                         "error": {key: error(p[key], m[key]) for key in p}})
            print(f"[{index + 1}/{len(configs)}] {name}: predicted {p['step'] * 1e3:.1f} ms, measured "
                  f"{m['step'] * 1e3:.1f} ms, error {100 * rows[-1]['error']['step']:+.1f} %", file=sys.stderr,
                  flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print("| configuration | step predicted / measured (ms) | step error | forward | backward | optimizer | "
          "communication not hidden (ms, p / m) |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        e, p, m = row["error"], row["predicted"], row["measured"]
        pct = lambda key: "-" if e[key] is None else f"{100 * e[key]:+.0f} %"
        print(f"| {row['config']} | {1e3 * p['step']:.1f} / {1e3 * m['step']:.1f} | {pct('step')} | {pct('forward')} | "
              f"{pct('backward')} | {pct('optimizer')} | {1e3 * p['communication_not_hidden']:.1f} / "
              f"{1e3 * m['communication_not_hidden']:.1f} |")
    for row in rows:
        for side in ("predicted", "measured"):
            if not row[side]["step"] > 0:
                sys.exit(f"step_time_error: {row['config']}: no {side} step time: {row[side]}")
    errors = [abs(row["error"]["step"]) for row in rows]
    print(f"\n{len(rows)} configurations: step time median |error| {100 * statistics.median(errors):.1f} %, "
          f"worst {100 * max(errors):.1f} % (targets: 10 %, 25 %)")
    if args.out:
        with open(args.out, "w") as file:
            json.dump(rows, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
