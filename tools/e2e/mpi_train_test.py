#!/usr/bin/env python3
"""`zero3 train --backend mpi` under `mpirun -np 4` (4 processes; CI has 2 cores, hence
--oversubscribe), held bit for bit to `--backend sim --ranks 4` with the same seed and config:
losses, grad norms, the final parameter hash and the hash over parameters and AdamW moments.
Each MPI report's measured_phases: one entry per step, the laps adding up to the step, waits on
collectives at 4 ranks. Then checkpoints across backends and world sizes, a rank killed mid-step,
a rank stopped (SIGSTOP) and named by its peers' timeout, and a rank killed while writing a
periodic checkpoint under HSDP and under hpZ.

    tools/e2e/mpi_train_test.py build/tools/zero3 /usr/bin/mpiexec
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
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


PHASE_KEYS = ["step_s", "forward_s", "backward_s", "recompute_s", "optimizer_s", "offload_s", "communication_wait_s"]


def expect_measured_phases(name, mpi_report, stdout, steps, extra):
    """Rank 0's wall clock per phase, one entry per step: the laps add up to the step, every rank of
    4 waits on collectives, recompute and offload only with their levers (tools/README.md)."""
    phases = mpi_report.get("measured_phases")
    if not isinstance(phases, list) or [entry.get("step") for entry in phases] != list(range(steps)):
        failures.append(f"{name}: measured_phases is not one entry per step: {phases}")
        return
    for entry in phases:
        where = f"{name}: measured_phases step {entry['step']}: {entry}"
        if any(not isinstance(entry.get(key), (int, float)) or entry[key] < 0 for key in PHASE_KEYS):
            failures.append(f"{where}: a phase is missing or negative")
            continue
        laps = entry["forward_s"] + entry["backward_s"] + entry["optimizer_s"]
        if abs(laps - entry["step_s"]) > max(0.05 * entry["step_s"], 1e-3):
            failures.append(f"{where}: forward + backward + optimizer = {laps}, not the step")
        if entry["communication_wait_s"] <= 0:
            failures.append(f"{where}: no communication wait at 4 ranks")
        if (entry["recompute_s"] > 0) != ("--checkpoint-activations" in extra):
            failures.append(f"{where}: recompute_s does not follow --checkpoint-activations")
        if (entry["offload_s"] > 0) != ("--offload-optimizer" in extra):
            failures.append(f"{where}: offload_s does not follow --offload-optimizer")
    if "phases (mean over the 2 steps after the first)" not in stdout:
        failures.append(f"{name}: no phases line in the summary:\n{stdout[-1500:]}")


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
            expect_measured_phases(name, mpi_report, mpi.stdout, 3, extra)
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


def tagged_processes(tag):
    """{world rank: pid} of the live processes whose environment holds ZERO3_TEST_TAG=tag."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as file:
                variables = file.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as file:
                state = file.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if f"ZERO3_TEST_TAG={tag}".encode() in variables and state not in ("Z", "X"):
            for variable in variables:
                if variable.startswith(b"OMPI_COMM_WORLD_RANK="):
                    found[int(variable.split(b"=")[1])] = int(entry)
    return found


def end_leftovers(tag, name):
    """A process of the job still there after mpirun ended (2 s of grace) is a failure; it is ended here."""
    deadline = time.monotonic() + 2
    while (left := tagged_processes(tag)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in left.values():
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
    if left:
        failures.append(f"{name}: processes of the job left after mpirun ended (killed now): {left}")


def stopped_rank(folder, name, extra):
    """Rank 2 is stopped (SIGSTOP) once training runs. A stopped process answers nothing, but the
    arrival board in shared memory still shows how far it got: a peer's collective timeout names
    world rank 2 as never arrived or stopped, with the collective and its group, and the job ends
    with exit 3 (liveness) well within 30 s; no process of the job is left behind."""
    tag = f"stop-{os.getpid()}-{time.monotonic_ns()}"
    command = [MPIEXEC, "--oversubscribe", "-np", "4", ZERO3, "train", "--backend", "mpi", "--model", "gpt-tiny",
               "--steps", "200", "--seed", "9", "--collective-timeout", "5", "--log-every", "1"] + extra
    stderr_path = os.path.join(folder, "stopped_stderr.txt")
    with open(stderr_path, "w") as stderr:
        job = subprocess.Popen(command, env=dict(ENV, ZERO3_TEST_TAG=tag), stdout=subprocess.PIPE, stderr=stderr,
                               text=True)
    watchdog = threading.Timer(90, job.kill)  # a hang before the first step ends here, then fails below
    watchdog.start()
    try:
        started = False
        for line in job.stdout:
            if line.startswith("step "):
                started = True
                break
        victim = tagged_processes(tag).get(2) if started else None
        if victim is None:
            job.kill()
            failures.append(f"{name}: no step line, or no process of world rank 2 found (started {started})")
            return
        os.kill(victim, signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            job.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            job.kill()
            job.communicate()
        seconds = time.monotonic() - stopped
    finally:
        watchdog.cancel()
        end_leftovers(tag, name)
    with open(stderr_path) as file:
        errors = file.read()
    if job.returncode != 3 or seconds > 30:
        failures.append(f"{name}: exit {job.returncode} {seconds:.1f} s after SIGSTOP; expected exit 3 within 30 s:\n"
                        f"{errors[-3000:]}")
    # "rank 1 of group 1 (ranks 2,3): collective #17 (all_gather ...) at ... did not complete within 5 s;
    # rank 0 (world rank 2) never arrived at #17 (...), and its process (pid N) is stopped (state T ...";
    # or, when the first timeout is in a group without rank 2 (its peer there only waits on rank 2):
    # "...; outside group 1 (ranks 1,3), world rank 2: its process (pid N) is stopped (state T ...".
    # Within one peer's part (no ';'), so that another peer's state is never read as rank 2's.
    naming = re.compile(r"rank \d+ of (world|group \d+ \(ranks [\d,]+\)): collective #\d+ \((all_gather|"
                        r"reduce_scatter|all_reduce|broadcast|barrier) .* did not complete within 5 s;.* "
                        r"(rank \d+ \(world rank 2\) (never arrived at #\d+ [^;]*, and|issued #\d+, but)|"
                        r"outside \1, world rank 2:) its process \(pid \d+\) is stopped \(state T")
    named = [match for match in map(naming.search, errors.splitlines()) if match]
    if not named:
        failures.append(f"{name}: no timeout names world rank 2 as stopped, with its collective and group:\n"
                        f"{errors[-3000:]}")
    elif job.returncode == 3:
        groups = sorted({match.group(1) for match in named})
        print(f"ok  stopped rank ({name}): exit 3 {seconds:.1f} s after SIGSTOP; world rank 2 named as stopped in "
              f"{', '.join(groups)}; no process left")


def killed_in_a_save(folder, name, extra, seed):
    """Rank R SIGKILLs itself while writing a periodic checkpoint (crash@checkpoint write: the crash
    fires only at checkpoint writes, not the save's barriers; the seed makes it a later save than
    the first). The job ends within
    30 s; DIR's latest complete checkpoint is, file for file, what the simulator saves at that step
    without faults, and resumes at other world sizes, ZeRO-3 bitwise equal to DDP."""
    config = config_file(folder, "save_kill", {})
    ck, sim_ck = os.path.join(folder, f"save_kill_{seed}"), os.path.join(folder, f"save_kill_sim_{seed}")
    common = ["train", "--model", "gpt-tiny", "--steps", "12", "--seed", str(seed), "--config", config] + extra
    killed = run(common + ["--backend", "mpi", "--save-every", "2", "--save-checkpoint", ck,
                           "--faults", "crash@checkpoint write=0.3"], processes=4, expect=None, timeout=60)
    output = killed.stdout + killed.stderr
    fired = re.search(r"^fault fired: crash on rank (\d) at checkpoint write \((\S+) of (\S+)/step_(\d+)\); "
                      r"rank \1 kills its own process \(SIGKILL\)$", output, re.MULTILINE)
    if killed.returncode == 0 or killed.seconds > 30 or not fired:
        failures.append(f"{name}: exit {killed.returncode} in {killed.seconds:.1f} s; expected a crash at a checkpoint "
                        f"write and a non-zero exit within 30 s:\n{output[-3000:]}")
        return
    crashed_step = int(fired.group(4))
    latest_path = os.path.join(ck, "latest")
    if not os.path.exists(latest_path):
        failures.append(f"{name}: the crash at step {crashed_step} left no complete checkpoint (seed {seed}: pick one "
                        f"whose crash comes after the first save)")
        return
    with open(latest_path) as file:
        latest = file.read().strip()
    if latest != f"step_{crashed_step - 2:08d}":
        failures.append(f"{name}: {latest_path} says {latest!r}; the crash came at step {crashed_step}, so expected "
                        f"the save before it, step_{crashed_step - 2:08d}")
        return
    run(common + ["--backend", "sim", "--ranks", "4", "--save-every", "2", "--save-checkpoint", sim_ck])
    saved, expected = os.path.join(ck, latest), os.path.join(sim_ck, latest)
    if not os.path.isdir(expected) or sorted(os.listdir(saved)) != sorted(os.listdir(expected)):
        failures.append(f"{name}: {saved} holds {sorted(os.listdir(saved))}, the simulator's "
                        f"{sorted(os.listdir(expected)) if os.path.isdir(expected) else 'nothing'}")
        return
    for file_name in sorted(os.listdir(expected)):
        with open(os.path.join(saved, file_name), "rb") as a, open(os.path.join(expected, file_name), "rb") as b:
            if a.read() != b.read():
                failures.append(f"{name}: {latest}/{file_name} differs from the simulator's uninterrupted save")
    # Loading DIR reads `latest`; at W 2 the group spans the world (flat ZeRO-3), at W 8 it is a real group.
    for ranks in ("2", "8"):
        resumed = run(common + ["--backend", "sim", "--ranks", ranks, "--load-checkpoint", ck, "--check"])
        if resumed.returncode == 0 and (f"resumed at step {crashed_step - 2} " not in resumed.stdout
                                        or not re.search(r"ZeRO-3 vs DDP[^:\n]*: bitwise equal", resumed.stdout)):
            failures.append(f"{name}: the resume at W {ranks} did not continue from step {crashed_step - 2} bitwise "
                            f"equal to DDP:\n{resumed.stdout[-3000:]}")
    print(f"ok  killed in a save ({name}): rank {fired.group(1)} killed writing {fired.group(2)} at step "
          f"{crashed_step}, exit {killed.returncode} in {killed.seconds:.1f} s; {latest} = the simulator's bytes, "
          f"resumed at W 2 and 8 bitwise equal to DDP")


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
        stopped_rank(folder, "world", [])
        stopped_rank(folder, "HSDP --shard-group 2", ["--shard-group", "2"])
        killed_in_a_save(folder, "HSDP --shard-group 2", ["--shard-group", "2"], seed=4)
        killed_in_a_save(folder, "hpZ --hpz 2", ["--hpz", "2"], seed=7)
        bench_comm(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for failure in failures:
        print("FAIL " + failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
