#!/usr/bin/env python3
"""Seeded input-mutation fuzz of everything a user hands zero3: model specs, train configs, traces
and checkpoints.

Each case takes a valid seed input, applies one to three seeded mutations (JSON-aware: a value
replaced by a boundary number, a wrong type, a huge string or a deep nest, a key dropped or added,
an element duplicated; byte-level: bits flipped, cut short, bytes inserted or deleted), runs the
commands that read that kind of input, and requires each to end in

  exit 0, or exit 1 with an error that names the file and, for a mutant that is still valid JSON,
  the JSON path ("at /...") and what was expected; or, for `zero3 replay` only, exit 3 with its
  verdict that the ranks the trace describes would hang or mix up collectives;

anything else is a finding: another exit code, a signal, a sanitizer report (the ASan + UBSan build
of `tools/test --sanitize` runs this too), a run past the time limit, or a failed consolidate that
left its output behind. Checkpoint mutants are re-signed most of the time (metadata and shard
checksums recomputed), so they reach the checks behind the checksums.

  tools/e2e/input_fuzz.py build/tools/zero3 --runs 200 --seed 7
  tools/e2e/input_fuzz.py build/tools/zero3 --seed 7 --case 41      # replay one case, kept under --out

This script is the command line; the fuzz itself is in tools/zero3py/fuzz/ (the package beside
this script): the seed inputs, the mutators, checkpoint re-signing, the judge and the runner.

Prints its seed first and a replay command for every finding; exits 1 when there is one.
"""
import argparse
import concurrent.futures
import os
import random
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: zero3py
from zero3py.fuzz.runner import Fuzz  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("zero3", help="the zero3 binary (the sanitizer build's, under tools/test --sanitize)")
    parser.add_argument("--seed", type=int, default=None,
                        help="default: $ZERO3_INPUT_FUZZ_SEED (tools/test sets it), else a random one; printed")
    parser.add_argument("--runs", type=int, default=200, help="cases, the four input kinds in turn")
    parser.add_argument("--case", type=int, default=None, help="run only this case (replay)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds one command may take")
    parser.add_argument("--out", default=os.path.join(ROOT, "fuzz-out", "inputs"),
                        help="where the inputs of failing cases are kept")
    args = parser.parse_args()
    if args.seed is None and os.environ.get("ZERO3_INPUT_FUZZ_SEED"):
        args.seed = int(os.environ["ZERO3_INPUT_FUZZ_SEED"])
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    zero3 = os.path.abspath(args.zero3)
    print(f"input_fuzz: seed {seed}; replay: tools/e2e/input_fuzz.py {args.zero3} --seed {seed} --runs {args.runs}",
          flush=True)
    work = tempfile.mkdtemp(prefix="zero3-input-fuzz-")
    try:
        fuzz = Fuzz(zero3, work, args.timeout)
        fuzz.make_seeds()
        numbers = [args.case] if args.case is not None else list(range(args.runs))
        outcomes = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for number, kind, name, log, findings in pool.map(lambda n: fuzz.case(seed, n), numbers):
                outcomes.append((number, kind, name, log, findings))
                if findings:
                    kept = os.path.join(args.out, f"seed-{seed}-case-{number}")
                    shutil.rmtree(kept, ignore_errors=True)
                    shutil.copytree(os.path.join(work, f"case-{number}"), kept)
                    print(f"input_fuzz: FINDING case {number} ({kind} {name}; {'; '.join(log)}); input kept in "
                          f"{kept}; replay: tools/e2e/input_fuzz.py {args.zero3} --seed {seed} --case {number}")
                    for finding in findings:
                        print("  " + finding.replace("\n", "\n    "))
        failing = [outcome for outcome in outcomes if outcome[4]]
        by_kind = {}
        for _, kind, _, _, findings in outcomes:
            by_kind.setdefault(kind, [0, 0])[bool(findings)] += 1
        # How deep the mutants got: exit 0 means a mutant passed every check and the command ran.
        for (kind, command), codes in sorted(fuzz.exits.items()):
            print(f"input_fuzz: {kind:10} zero3 {command:11} " +
                  ", ".join(f"exit {code}: {count}" for code, count in sorted(codes.items(), key=str)))
        print("input_fuzz: " + ", ".join(f"{kind} {ok + bad} cases ({bad} failing)" for kind, (ok, bad) in
                                         sorted(by_kind.items())) + f"; seed {seed}")
        return 1 if failing else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
