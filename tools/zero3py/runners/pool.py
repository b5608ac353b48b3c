"""W rank processes of one target kept alive across cases (the supervisor's side of rank.py): a
case costs a training run, not W interpreter starts. A rank that dies, raises or does not answer
within the case's timeout ends the pool: its ranks are killed, and the next case starts fresh ones.
Ranks that all raised are kept when a health check (an all-reduce) shows their group still in step.

    pool = RankPool("deepspeed", world=2, log_dir=...)
    pool.submit(case_dir, weights_path)      # every rank starts the case
    ranks = pool.collect(deadline)           # one dict per rank (PROTOCOL.md, "ranks")
"""
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time

# Seconds the other ranks get to answer once one rank failed, before they count as stuck and are
# killed: after an exception a peer usually blocks in a collective the failed rank never joins.
GRACE_AFTER_FAILURE_S = 3.0
# Seconds for the health check after a case in which every rank raised (collect).
HEALTH_TIMEOUT_S = 10.0
# Importing torch and DeepSpeed, the first time on a machine DeepSpeed's JIT-compiled comm op, and
# the warm-up case (rank.py), on a busy 2-core machine.
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


class RunnerError(RuntimeError):
    """The runner itself is broken (its ranks cannot start, or answered outside the protocol)."""


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tools_dir():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class RankPool:
    def __init__(self, target, world, log_dir):
        self.target, self.world, self.log_dir = target, world, log_dir
        self.ranks, self.logs, self.offsets = [], [], []
        env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1", PYTHONHASHSEED="0",
                   PYTHONPATH=os.pathsep.join(filter(None, [tools_dir(), os.environ.get("PYTHONPATH")])))
        port = free_port()
        for rank in range(world):
            log_path = os.path.join(log_dir, f"{target}-w{world}-rank{rank}.log")
            log = open(log_path, "w+")
            command = [sys.executable, "-m", "zero3py.runners.rank", "--target", target, "--rank", str(rank),
                       "--world", str(world), "--port", str(port)]
            # What torchrun would set: DeepSpeed reads them even with the process group already up.
            rank_env = dict(env, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                            LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            self.ranks.append(subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                               stderr=log, env=rank_env, text=True, bufsize=1))
            self.logs.append(log)
            self.offsets.append(0)
        ready = self.read_answers(time.monotonic() + START_TIMEOUT_S, grace=False)
        if any(r.get("ready") != i for i, r in enumerate(ready)):
            self.close()
            raise RunnerError(f"{target} ranks did not start at world {world}: " + "; ".join(
                f"rank {i}: {r.get('state')} {r.get('last_output', '')[-800:]}" for i, r in enumerate(ready)))

    def last_output(self, rank, chars=2000):
        log = self.logs[rank]
        log.flush()
        log.seek(self.offsets[rank])
        return log.read()[-chars:]

    def submit(self, case_dir, weights_path):
        for rank, process in enumerate(self.ranks):
            self.logs[rank].seek(0, os.SEEK_END)
            self.offsets[rank] = self.logs[rank].tell()
            try:
                process.stdin.write(json.dumps({"case": case_dir, "weights": weights_path}) + "\n")
                process.stdin.flush()
            except BrokenPipeError:
                pass  # dead already: read_answers reports its exit

    def read_answers(self, deadline, grace=True):
        """Each rank's JSON answer, or what became of it: died (exit code or signal), stuck."""
        answers = [None] * self.world
        waiting = {process.stdout.fileno(): rank for rank, process in enumerate(self.ranks)}
        while waiting:
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                break
            readable, _, _ = select.select(list(waiting), [], [], timeout)
            for fd in readable:
                rank = waiting.pop(fd)
                line = self.ranks[rank].stdout.readline()
                answers[rank] = json.loads(line) if line.strip().startswith("{") else self.died(rank, line)
                if grace and answers[rank].get("state") not in ("ok", "unsupported"):
                    deadline = min(deadline, time.monotonic() + GRACE_AFTER_FAILURE_S)
        for rank in waiting.values():
            answers[rank] = {"state": "stuck"}
        stuck = [rank for rank in waiting.values() if self.ranks[rank].poll() is None]
        for rank in stuck:  # where does it wait? faulthandler writes every thread's stack to the log
            self.ranks[rank].send_signal(signal.SIGUSR1)
        if stuck:
            time.sleep(STACK_DUMP_S)
        for rank, answer in enumerate(answers):
            answer.update(rank=rank, last_output=self.last_output(rank))
            if rank in stuck:
                answer.update(waiting_stack(self.last_output(rank, chars=50_000)))
        return answers

    def died(self, rank, line):
        """A rank whose answer pipe closed (or printed something that is not an answer)."""
        process = self.ranks[rank]
        try:
            code = process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return {"state": "error", "message": f"printed outside the protocol: {line[:500]!r}"}
        if code < 0:
            return {"state": "signal", "signal": signal.Signals(-code).name}
        return {"state": "exit", "exit_code": code}

    def collect(self, deadline):
        """The ranks' answers to the submitted case. The pool is closed when a rank died or is
        stuck; when ranks only raised, it is kept if the health check passes."""
        answers = self.read_answers(deadline)
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
        for process in self.ranks:
            try:
                process.stdin.write(json.dumps({"health": 1}) + "\n")
                process.stdin.flush()
            except BrokenPipeError:
                return False
        checks = self.read_answers(time.monotonic() + HEALTH_TIMEOUT_S, grace=False)
        expected = self.world * (self.world + 1) / 2
        return all(c.get("state") == "health" and c.get("sum") == expected for c in checks)

    @property
    def alive(self):
        return bool(self.ranks) and all(p.poll() is None for p in self.ranks)

    def close(self):
        """Kills every rank (each by its own pid) and waits for it."""
        for process in self.ranks:
            if process.poll() is None:
                process.kill()
        for process in self.ranks:
            process.wait()
        for log in self.logs:
            log.close()
        self.ranks, self.logs = [], []
