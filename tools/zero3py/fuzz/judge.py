"""Judging one zero3 command on a mutant: what is an acceptable end (exit 0; exit 1 with an error
naming the file and, for valid JSON, the JSON path and what was expected; replay's exit 3 with its
liveness verdict) and what is a finding (another exit code, a signal, a sanitizer report, a run
past the time limit, a failed command's output left on disk); and the sanitizer settings that give
a sanitizer report an exit code of its own."""
import json
import os
import re

ASAN_EXIT, UBSAN_EXIT = 86, 87
REPLAY_LIVENESS_VERDICT = "replay found ranks that would hang or mix up collectives"
SANITIZER_ENV = {
    # A sanitizer report must not look like "exit 1, bad input": give each its own exit code.
    "ASAN_OPTIONS": f"exitcode={ASAN_EXIT}:allocator_may_return_null=1:detect_leaks=1",
    "UBSAN_OPTIONS": f"exitcode={UBSAN_EXIT}:halt_on_error=1:print_stacktrace=1",
}
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


def reject_constant(name):
    raise ValueError(f"{name} is not JSON")


def is_json(path):
    """Strict JSON, as nlohmann reads it: NaN and Infinity are not numbers there."""
    try:
        with open(path, "rb") as file:
            json.loads(file.read(), parse_constant=reject_constant)
        return True
    except (ValueError, RecursionError, OSError):
        return False


def findings_of(kind, target, args, out, code, err):
    """The findings (strings; none when acceptable) of `zero3 ARGS` on the mutant `target` of input
    kind `kind`, which ended with exit `code` (None: timed out) and stderr `err`; `out` is the output
    path it was given, or None."""
    command = "zero3 " + " ".join(args)
    if any(mark in err for mark in SANITIZER_MARKS) or code in (ASAN_EXIT, UBSAN_EXIT):
        return [f"{command}: sanitizer report (exit {code}):\n{err[-3000:]}"]
    if code is None:
        return [f"{command}: {err} (a hang, or work unbounded by the input's checks)"]
    if code < 0:
        return [f"{command}: killed by signal {-code}:\n{err[-2000:]}"]
    if kind == "trace" and args[0] == "replay" and code == 3 and REPLAY_LIVENESS_VERDICT in err:
        # A well-formed trace of ranks that would hang or mix up collectives (a mutant can make
        # one rank call another module): exit 3 is replay's designed answer about the program
        # the trace describes, and the timeline it writes is the diagnosis, not a half-written file.
        return []
    found = []
    if out and code != 0 and os.path.exists(out):
        found.append(f"{command}: exit {code} but its output {out} was left on disk")
    if code == 0:
        return found
    if code != 1:
        return found + [f"{command}: exit {code}, expected 0 or 1:\n{err[-2000:]}"]
    message = err.strip()
    if "error:" not in message or os.path.basename(target) not in message:
        return found + [f"{command}: exit 1 without naming {target}:\n{message[-2000:]}"]
    if kind != "checkpoint" and is_json(target):
        names_path = re.search(r"at /|/[A-Za-z0-9_]+: ", message)
        if not names_path or not re.search(r"expected|allowed|missing required", message, re.I):
            found.append(f"{command}: exit 1 on valid JSON without a JSON path and an expectation:\n"
                         f"{message[-2000:]}")
    return found
