#!/usr/bin/env python3
"""`zero3 train --backend mpi` under `mpirun -np 4` (4 processes; CI has 2 cores, hence
--oversubscribe), held bit for bit to `--backend sim --ranks 4` with the same seed and config:
losses, grad norms, the final parameter hash and the hash over parameters and AdamW moments.
Then checkpoints across backends and world sizes, and a rank killed mid-step.

    tools/e2e/mpi_train_test.py build/tools/zero3 /usr/bin/mpiexec
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ZERO3, MPIEXEC = sys.argv[1], sys.argv[2]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
COMPARED = ["losses", "grad_norms", "final_param_hash", "final_state_hash"]
failures = []


def run(arguments, processes=None, expect=0, timeout=300):
    command = ([MPIEXEC, "--oversubscribe", "-np", str(processes)] if processes else []) + [ZERO3] + arguments
    started = time.monotonic()
    result = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=timeout)
    result.seconds = time.monotonic() - started
    if expect is not None and result.returncode != expect:
        failures.append(f"{' '.join(command)}: exit {result.returncode}, expected {expect}\n"
                        f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def report(path):
    with open(path) as file:
        return json.load(file)


def config_file(folder, name, zero):
    """Persistence 0 so that every parameter is sharded; small prefetch and reuse budgets that hit."""
    path = os.path.join(folder, name + ".json")
    zero = dict({"stage3_param_persistence_threshold": 0, "stage3_prefetch_bucket_size": 4096,
                 "stage3_max_reuse_distance": 4096}, **zero)
    with open(path, "w") as file:
        json.dump({"zero_optimization": zero}, file)
    return path


def expect_equal(name, mpi_report, sim_report):
    for key in COMPARED:
        if mpi_report.get(key) != sim_report.get(key):
            failures.append(f"{name}: {key} differs: mpi {mpi_report.get(key)} vs sim {sim_report.get(key)}")


def equality_matrix(folder):
    configs = {"plain": config_file(folder, "plain", {}),
               "leaf": config_file(folder, "leaf", {"zero3_leaf_modules": ["moe"]})}
    cases = []
    for model, config in [("gpt-tiny", "plain"), ("moe-tiny", "leaf"), ("zero-sized", "plain"), ("mlp-tiny", "plain")]:
        for zero in ["3", "0"]:
            for bf16 in [False, True]:
                cases.append((model, config, zero, bf16, 1))
    cases = [case + ("cpu", []) for case in cases]
    cases += [("gpt-tiny", "plain", "1", False, 2, "cpu", []), ("moe-tiny", "leaf", "2", True, 1, "cpu", []),
              ("gpt-tiny", "plain", "3", False, 3, "cpu", []), ("gpt-tiny", "plain", "0", False, 3, "cpu", []),
              ("moe-tiny", "leaf", "3", True, 3, "cpu", []), ("gpt-tiny", "plain", "3", True, 1, "opaque", [])]
    # The memory levers: activation checkpointing and CPU offload, at each stage.
    lever_modules = {"gpt-tiny": "transformer_block", "moe-tiny": "layers.2", "zero-sized": "layers.0,layers.1"}

    def levers(model, zero):
        return (["--checkpoint-activations", lever_modules[model], "--offload-optimizer", "cpu"]
                + (["--offload-param", "cpu"] if zero == "3" else []))
    cases += [("gpt-tiny", "plain", "3", False, 1, "cpu", levers("gpt-tiny", "3")),
              ("moe-tiny", "leaf", "2", True, 1, "cpu", levers("moe-tiny", "2")),
              ("zero-sized", "plain", "1", False, 2, "cpu", levers("zero-sized", "1")),
              ("gpt-tiny", "plain", "3", True, 1, "opaque", levers("gpt-tiny", "3"))]
    # Hierarchical sharding: each group is an MPI_Comm_split of the world, summed in group-rank order.
    cases += [("gpt-tiny", "plain", "3", False, 2, "cpu", ["--shard-group", "2"]),
              ("zero-sized", "plain", "3", False, 1, "cpu", ["--shard-group", "1"]),
              ("moe-tiny", "leaf", "3", True, 1, "cpu", ["--hpz", "2"]),
              ("gpt-tiny", "plain", "3", False, 1, "cpu", ["--hpz", "2", "--checkpoint-activations",
                                                           "transformer_block"])]
    for model, config, zero, bf16, gas, device, extra in cases:
        name = f"{model} zero {zero}{' bf16' if bf16 else ''} gas {gas} on {device}{' ' if extra else ''}{' '.join(extra)}"
        common = ["train", "--model", model, "--steps", "3", "--seed", "7", "--zero", zero, "--config",
                  configs[config], "--gas", str(gas), "--device", device] + (["--bf16"] if bf16 else []) + extra
        mpi_path, sim_path = os.path.join(folder, "mpi.json"), os.path.join(folder, "sim.json")
        for path in (mpi_path, sim_path):
            if os.path.exists(path):
                os.remove(path)
        mpi = run(common + ["--backend", "mpi", "--report", mpi_path], processes=4)
        sim = run(common + ["--backend", "sim", "--ranks", "4", "--report", sim_path])
        if mpi.returncode == 0 and sim.returncode == 0:
            mpi_report, sim_report = report(mpi_path), report(sim_path)
            expect_equal(name, mpi_report, sim_report)
            if mpi_report.get("mpi", {}).get("world") != 4:
                failures.append(f"{name}: the mpi report does not say world 4: {mpi_report.get('mpi')}")
            # Both print and report the model-state line, with the same measured bytes.
            if zero != "0" and (mpi_report.get("model_state") != sim_report.get("model_state")
                                or "model state per rank:" not in mpi.stdout):
                failures.append(f"{name}: model state: mpi {mpi_report.get('model_state')} vs sim "
                                f"{sim_report.get('model_state')}")
            print(f"ok  {name}: mpi = sim ({mpi_report['final_state_hash']}, {mpi.seconds:.1f} s)")


def checkpoints(folder):
    config = config_file(folder, "checkpoint", {})
    common = ["train", "--model", "gpt-tiny", "--seed", "3", "--config", config]
    # Saved by 4 processes after 2 of 4 steps: the same files the simulator writes at W = 4.
    mpi_dir, sim_dir = os.path.join(folder, "mpi_ck"), os.path.join(folder, "sim_ck")
    run(common + ["--backend", "mpi", "--steps", "2", "--zero", "3", "--save-checkpoint", mpi_dir], processes=4)
    run(common + ["--backend", "sim", "--ranks", "4", "--steps", "2", "--zero", "3", "--save-checkpoint", sim_dir])
    if os.path.isdir(mpi_dir) and os.path.isdir(sim_dir):
        names = sorted(os.listdir(sim_dir))
        if sorted(os.listdir(mpi_dir)) != names:
            failures.append(f"checkpoint files differ: mpi {sorted(os.listdir(mpi_dir))} vs sim {names}")
        for name in names:
            with open(os.path.join(mpi_dir, name), "rb") as a, open(os.path.join(sim_dir, name), "rb") as b:
                if a.read() != b.read():
                    failures.append(f"checkpoint file {name} differs between mpirun -np 4 and the simulator at W 4")
    # The MPI checkpoint resumes in the simulator at W = 3, ZeRO-3 bitwise equal to DDP (--check).
    resumed = run(common + ["--backend", "sim", "--ranks", "3", "--steps", "4", "--zero", "3", "--check",
                            "--load-checkpoint", mpi_dir, "--report", os.path.join(folder, "resumed_sim.json")])
    if resumed.returncode == 0 and "ZeRO-3 vs DDP: bitwise equal" not in resumed.stdout:
        failures.append("the resumed simulator run did not report bitwise equality with DDP:\n" + resumed.stdout)
    # The reverse: the simulator's checkpoint resumes under mpirun -np 2, equal to the sim at W = 2.
    two = [common + ["--steps", "4", "--zero", "3", "--load-checkpoint", sim_dir]]
    run(two[0] + ["--backend", "mpi", "--report", os.path.join(folder, "resumed_mpi.json")], processes=2)
    run(two[0] + ["--backend", "sim", "--ranks", "2", "--report", os.path.join(folder, "resumed_sim2.json")])
    if all(os.path.exists(os.path.join(folder, f)) for f in ["resumed_mpi.json", "resumed_sim2.json"]):
        expect_equal("sim checkpoint resumed at mpirun -np 2",
                     report(os.path.join(folder, "resumed_mpi.json")), report(os.path.join(folder, "resumed_sim2.json")))
        print("ok  checkpoints: mpi files = sim files; mpi -> sim W 3 = DDP; sim -> mpi -np 2 = sim W 2")


def killed_rank(folder):
    """A rank SIGKILLs itself mid-run (--faults crash): every process ends, fast, the rank is named,
    the survivors say they were terminated, and the checkpoint directory keeps its previous save."""
    ck = os.path.join(folder, "kill_ck")
    common = ["train", "--model", "gpt-tiny", "--seed", "5", "--zero", "3", "--backend", "mpi"]
    run(common + ["--steps", "2", "--save-checkpoint", ck], processes=4)
    before = {name: open(os.path.join(ck, name), "rb").read() for name in os.listdir(ck)}
    killed = run(common + ["--steps", "40", "--save-checkpoint", ck, "--faults", "crash=0.02"], processes=4,
                 expect=None, timeout=60)
    output = killed.stdout + killed.stderr
    if killed.returncode == 0:
        failures.append("a run with a killed rank exited 0:\n" + output[-3000:])
    if killed.seconds > 30:
        failures.append(f"the job took {killed.seconds:.1f} s to end after a rank was killed (limit 30 s)")
    fired = [line for line in output.splitlines() if line.startswith("fault fired: crash")]
    if not fired:
        failures.append("no crash fired:\n" + output[-3000:])
    else:
        rank = fired[0].split("rank ")[-1].split()[0]
        if f"process rank {rank} " not in output:
            failures.append(f"the launcher's message does not name rank {rank}:\n{output[-3000:]}")
        if "terminated by the launcher" not in output:
            failures.append("no surviving rank said it was terminated:\n" + output[-3000:])
    after = {name: open(os.path.join(ck, name), "rb").read() for name in os.listdir(ck)}
    if after != before:
        failures.append("the killed run changed the previous complete checkpoint")
    resumed = run(["train", "--model", "gpt-tiny", "--seed", "5", "--zero", "3", "--backend", "sim", "--ranks", "4",
                   "--steps", "3", "--load-checkpoint", ck])
    if resumed.returncode == 0:
        print(f"ok  killed rank: exit {killed.returncode} in {killed.seconds:.1f} s; previous checkpoint intact")


def bad_input(folder):
    """Refused before any training, by every rank, with exit 1 (MPI_Abort carries the code)."""
    for arguments, text in [
            (["--load-checkpoint", os.path.join(folder, "missing")], "no such checkpoint directory"),
            (["--ranks", "3"], "--ranks 3 but the launcher started 4 processes"),
            (["--faults", "late"], "under --backend mpi only crash can fire"),
            (["--record", os.path.join(folder, "trace.json")], "--record records the simulator's events"),
            (["--shard-group", "3"], "/zero_optimization/mics_shard_size = 3 does not divide the world size 4")]:
        result = run(["train", "--backend", "mpi", "--steps", "2"] + arguments, processes=4, expect=1)
        if text not in result.stderr:
            failures.append(f"{arguments}: expected {text!r} in:\n{result.stderr[-2000:]}")
    # Without a launcher MPI runs a singleton job: it trains, on one rank, and says so.
    alone = run(["train", "--backend", "mpi", "--steps", "1"], expect=0)
    if "started without a launcher: this process is the job's only rank" not in alone.stderr:
        failures.append(f"--backend mpi without a launcher did not say it runs one rank:\n{alone.stderr[-2000:]}")
    if not os.path.exists(os.path.join(folder, "trace.json")):
        print("ok  bad input: exit 1 with the reason, nothing written")
    else:
        failures.append("a refused --record left a trace file")


def bench_comm(folder):
    """bench comm --backend mpi: every size checked (#wrong 0) and set beside the simulator's."""
    path = os.path.join(folder, "bench.json")
    run(["bench", "comm", "--backend", "mpi", "--max-bytes", "65536", "--report", path], processes=4)
    if not os.path.exists(path):
        return
    rows = report(path)["rows"]
    if {row["op"] for row in rows} != {"all_gather", "reduce_scatter"} or len(rows) != 8:
        failures.append(f"bench comm --backend mpi: expected 4 sizes of both ops, got {rows}")
    for row in rows:
        if row["wrong"] != 0 or not row["sim_busbw_gbps"] > 0 or not row["ratio_to_sim_busbw"] > 0:
            failures.append(f"bench comm --backend mpi: bad row {row}")
    print(f"ok  bench comm --backend mpi: {len(rows)} rows, #wrong 0, ratios to the simulator present")


def main():
    folder = tempfile.mkdtemp(prefix="zero3_mpi_test_")
    try:
        equality_matrix(folder)
        bad_input(folder)
        checkpoints(folder)
        killed_rank(folder)
        bench_comm(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for failure in failures:
        print("FAIL " + failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
