"""W rank processes of one target kept alive across cases (the supervisor's side of rank.py): a
case costs a training run, not W interpreter starts. A rank that dies, raises or does not answer
within the case's timeout ends the pool: its ranks are killed, and the next case starts fresh ones.
Ranks that all raised are kept when a health check (an all-reduce) shows their group still in step.

Ranks are forked by multiprocessing's fork server, which imported torch, the runner and the target's
framework once (preload.py): a pool starts in under a second, not the 7-15 s of W interpreters
importing torch and DeepSpeed on a busy 2-core machine, and a campaign starts a pool after every
hang, crash and confirming (`fresh`) run.

    pool = RankPool("deepspeed", world=2, log_dir=...)
    pool.submit(case_dir, weights_path)      # every rank starts the case
    ranks = pool.collect(deadline)           # one dict per rank (PROTOCOL.md, "ranks")
"""
import json
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import os
import signal
import socket
import time
import unittest.mock

from zero3py.runners import rank as rank_body

# Seconds the other ranks get to answer once one rank failed, before they count as stuck and are
# killed: after an exception a peer usually blocks in a collective the failed rank never joins.
GRACE_AFTER_FAILURE_S = 3.0
# A case's ranks that are all still running and each used under IDLE_CPU_FRACTION of a core over
# the last IDLE_WINDOW_S seconds are stuck without waiting out the case's limit: each waits on
# another (in a collective, a store, a lock) and nothing outside them can wake them. Load cannot
# fake it: a rank slowed by other processes is runnable and gets its share of the cores (issue 36's
# false hangs were ranks past a limit, not idle ones), while a deadlocked case on this machine
# used to cost its whole limit, 60 s, and 300 s more to confirm.
IDLE_WINDOW_S = 10.0
IDLE_CPU_FRACTION = 0.02
# How often read_answers looks at the ranks' CPU time while it waits.
IDLE_SAMPLE_S = 1.0
# Seconds for the health check after a case in which every rank raised (collect).
HEALTH_TIMEOUT_S = 10.0
# The fork server's imports (the first pool only), the first time on a machine DeepSpeed's
# JIT-compiled comm op, and the warm-up case (rank.py), on a busy 2-core machine.
START_TIMEOUT_S = 600.0
# Seconds a stuck rank gets to write its stacks to its log after SIGUSR1 (faulthandler, rank.py).
STACK_DUMP_S = 1.0


def waiting_stack(output):
    """{"stack": the Python stacks faulthandler dumped (rank.py's SIGUSR1), "waits_in": the innermost
    frame of the rank's main thread (the one running rank.py) as "file.py:line in function"}, or {}
    when the output holds no dump."""
    starts = [i for i in (output.find("Current thread 0x"), output.find("Thread 0x")) if i >= 0]
    if not starts:
        return {}
    dump = output[min(starts):]
    blocks = [block for block in dump.split("\n\n") if "(most recent call first)" in block]
    main = next((block for block in blocks if "rank.py" in block), blocks[0] if blocks else "")
    frame = next((line.strip() for line in main.splitlines() if line.strip().startswith("File ")), "")
    where = frame
    parts = frame.split('"')  # File "/path/x.py", line 12 in wait
    if len(parts) == 3:
        where = os.path.basename(parts[1]) + ":" + parts[2].replace(", line ", "").strip()
    return {"stack": dump[-3000:], "waits_in": where}


def cpu_seconds(pid):
    """User and system CPU seconds of a process, every thread included (proc(5): /proc/PID/stat
    fields 14 and 15), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()  # after the command name, from field 3 on
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class IdleWatch:
    """Whether the ranks still owing an answer have all been idle (IDLE_CPU_FRACTION of a core)
    for IDLE_WINDOW_S: sampled at most every IDLE_SAMPLE_S seconds."""

    def __init__(self, pids):
        self.pids = pids
        self.samples = {rank: [] for rank in range(len(pids))}  # rank -> [(time, cpu seconds)]
        self.last_sample = float("-inf")

    def all_idle(self, ranks):
        now = time.monotonic()
        if now - self.last_sample < IDLE_SAMPLE_S:
            return False
        self.last_sample = now
        idle = bool(ranks)
        for rank in ranks:
            cpu = cpu_seconds(self.pids[rank])
            if cpu is None:
                return False  # exited: its pipe's end says how
            history = self.samples[rank]
            history.append((now, cpu))
            while len(history) > 1 and history[1][0] <= now - IDLE_WINDOW_S:
                history.pop(0)
            since, cpu_then = history[0]
            idle = idle and now - since >= IDLE_WINDOW_S and cpu - cpu_then < IDLE_CPU_FRACTION * (now - since)
        return idle


class RunnerError(RuntimeError):
    """The runner itself is broken (its ranks cannot start, or answered outside the protocol)."""


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tools_dir():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fork_server(target):
    """The multiprocessing context whose server forks this process's ranks, started on first use
    with preload.py imported. One server per supervisor (a supervisor serves one target). Its
    environment is the ranks': set only while it starts, so the supervisor's own children (the
    repro scripts it verifies) keep the user's."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["zero3py.runners.preload"])
    rank_environment = {"DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0",
                        "ZERO3_RUNNER_TARGET": target,
                        "PYTHONPATH": os.pathsep.join(filter(None, [tools_dir(), os.environ.get("PYTHONPATH")]))}
    with unittest.mock.patch.dict(os.environ, rank_environment):  # restored on leaving
        multiprocessing.forkserver.ensure_running()
    return context


class RankPool:
    def __init__(self, target, world, log_dir):
        self.target, self.world, self.log_dir = target, world, log_dir
        self.ranks, self.conns, self.log_paths, self.offsets = [], [], [], []
        context = fork_server(target)
        port = free_port()
        for rank in range(world):
            log_path = os.path.join(log_dir, f"{target}-w{world}-rank{rank}.log")
            open(log_path, "w").close()
            ours, theirs = context.Pipe()
            process = context.Process(target=rank_body.serve, args=(target, rank, world, port, theirs, log_path),
                                      name=f"{target}-rank{rank}", daemon=True)
            process.start()
            theirs.close()  # so that the rank's death reads as the end of our end
            self.ranks.append(process)
            self.conns.append(ours)
            self.log_paths.append(log_path)
            self.offsets.append(0)
        ready = self.read_answers(time.monotonic() + START_TIMEOUT_S, grace=False)
        if any(r.get("ready") != i for i, r in enumerate(ready)):
            self.close()
            raise RunnerError(f"{target} ranks did not start at world {world}: " + "; ".join(
                f"rank {i}: {r.get('state')} {r.get('last_output', '')[-800:]}" for i, r in enumerate(ready)))

    def last_output(self, rank, chars=2000):
        """What the rank wrote to its log since the current case was submitted (its last chars)."""
        with open(self.log_paths[rank], errors="replace") as log:
            log.seek(self.offsets[rank])
            return log.read()[-chars:]

    def send(self, rank, request):
        """False when the rank's pipe is closed (it died: read_answers reports how)."""
        try:
            self.conns[rank].send_bytes(json.dumps(request).encode())
            return True
        except (BrokenPipeError, ConnectionResetError, OSError):
            return False

    def submit(self, case_dir, weights_path):
        for rank in range(self.world):
            self.offsets[rank] = os.path.getsize(self.log_paths[rank])
            self.send(rank, {"case": case_dir, "weights": weights_path})

    def read_answers(self, deadline, grace=True, idle_is_stuck=False):
        """Each rank's JSON answer, or what became of it: died (exit code or signal), stuck (still
        running at the deadline or, with idle_is_stuck, idle with every other rank that owes an
        answer: IdleWatch)."""
        answers = [None] * self.world
        waiting = {self.conns[rank]: rank for rank in range(self.world)}
        idle = IdleWatch([process.pid for process in self.ranks])
        idled = False
        while waiting:
            timeout = deadline - time.monotonic()
            idled = idle_is_stuck and idle.all_idle(list(waiting.values()))
            if timeout <= 0 or idled:
                break
            wait_s = min(timeout, IDLE_SAMPLE_S) if idle_is_stuck else timeout
            for conn in multiprocessing.connection.wait(list(waiting), wait_s):
                rank = waiting.pop(conn)
                try:
                    answers[rank] = json.loads(conn.recv_bytes())
                except (EOFError, OSError):
                    answers[rank] = self.died(rank)
                if grace and answers[rank].get("state") not in ("ok", "unsupported"):
                    deadline = min(deadline, time.monotonic() + GRACE_AFTER_FAILURE_S)
        for rank in waiting.values():
            answers[rank] = {"state": "stuck", **({"idle_s": IDLE_WINDOW_S} if idled else {})}
        stuck = [rank for rank in waiting.values() if self.ranks[rank].is_alive()]
        for rank in stuck:  # where does it wait? faulthandler writes every thread's stack to the log
            os.kill(self.ranks[rank].pid, signal.SIGUSR1)
        if stuck:
            time.sleep(STACK_DUMP_S)
        for rank, answer in enumerate(answers):
            answer.update(rank=rank, last_output=self.last_output(rank))
            if rank in stuck:
                answer.update(waiting_stack(self.last_output(rank, chars=50_000)))
        return answers

    def died(self, rank):
        """A rank whose pipe closed: its exit code or signal."""
        process = self.ranks[rank]
        process.join(timeout=10)
        if process.exitcode is None:
            return {"state": "error", "message": "closed its pipe to the supervisor but did not exit"}
        if process.exitcode < 0:
            return {"state": "signal", "signal": signal.Signals(-process.exitcode).name}
        return {"state": "exit", "exit_code": process.exitcode}

    def collect(self, deadline):
        """The ranks' answers to the submitted case. The pool is closed when a rank died or is
        stuck; when ranks only raised, it is kept if the health check passes."""
        answers = self.read_answers(deadline, idle_is_stuck=True)
        states = {a["state"] for a in answers}
        if not states <= {"ok", "unsupported"} and not (states <= {"ok", "unsupported", "exception"}
                                                         and self.healthy()):
            self.close()
        return answers

    def healthy(self):
        """Every rank answers an all-reduce of rank + 1 with W(W+1)/2 in time. Ranks that raised at
        the same point (the usual SPMD failure) leave the process group in step, so the next case
        need not pay W fresh interpreters (seconds each); a rank that raised between collectives
        the others made leaves it out of step, and this all-reduce then hangs or sums wrongly."""
        if not all([self.send(rank, {"health": 1}) for rank in range(self.world)]):
            return False
        checks = self.read_answers(time.monotonic() + HEALTH_TIMEOUT_S, grace=False)
        expected = self.world * (self.world + 1) / 2
        return all(c.get("state") == "health" and c.get("sum") == expected for c in checks)

    @property
    def alive(self):
        return bool(self.ranks) and all(p.is_alive() for p in self.ranks)

    def close(self):
        """Kills every rank and waits for it."""
        for process in self.ranks:
            if process.is_alive():
                process.kill()
        for process in self.ranks:
            process.join()
            process.close()
        for conn in self.conns:
            conn.close()
        self.ranks, self.conns = [], []
