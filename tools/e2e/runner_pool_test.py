#!/usr/bin/env python3
"""The runner pool's idle rule (tools/zero3py/runners/pool.py IdleWatch): ranks that all sit idle
for the window are stuck at once; a rank that works, however slowly, is not. Plain processes stand
in for ranks, so this runs without torch:

- two sleeping processes are idle once the window has passed, not before;
- a sleeping one beside a busy one is not (its peer still works: no deadlock);
- a busy process sharing the machine's cores with four `yes` processes (more load than the false-hang
  setting of issue 36) is never idle: load slows a rank, it does not stop it;
- a process that exited is not idle (its pipe tells how it ended).

    python3 tools/e2e/runner_pool_test.py
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from zero3py.runners import pool  # noqa: E402

WINDOW_S = 3.0
BUSY = [sys.executable, "-c", "while True: pass"]
IDLE = ["sleep", "60"]


def watch_for(processes, seconds):
    """Samples an IdleWatch over the processes for `seconds`: the first time all were idle, or None."""
    watch = pool.IdleWatch([p.pid for p in processes])
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if watch.all_idle(list(range(len(processes)))):
            return time.monotonic() - start
        time.sleep(0.05)
    return None


def main():
    pool.IDLE_WINDOW_S = WINDOW_S
    pool.IDLE_SAMPLE_S = 0.25
    failures, started = [], []

    def start(command):
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        started.append(process)
        return process

    try:
        idle_after = watch_for([start(IDLE), start(IDLE)], WINDOW_S + 2)
        if idle_after is None or idle_after < WINDOW_S:
            failures.append(f"two sleeping processes: idle after {idle_after} s, expected between {WINDOW_S} and "
                            f"{WINDOW_S + 2} s")
        if (seen := watch_for([start(IDLE), start(BUSY)], WINDOW_S + 2)) is not None:
            failures.append(f"a sleeping process beside a busy one was called idle after {seen:.1f} s")
        for _ in range(4):
            start(["yes"])
        if (seen := watch_for([start(BUSY)], WINDOW_S + 3)) is not None:
            failures.append(f"a busy process beside four `yes` was called idle after {seen:.1f} s")
        gone = subprocess.Popen(["true"])
        gone.wait()
        if pool.IdleWatch([gone.pid]).all_idle([0]):
            failures.append("an exited process was called idle")
    finally:
        for process in started:
            process.kill()
            process.wait()
    for failure in failures:
        print("FAIL:", failure)
    print("runner_pool_test:", "failed" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
