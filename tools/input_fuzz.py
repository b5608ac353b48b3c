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

  tools/input_fuzz.py build/tools/zero3 --runs 200 --seed 7
  tools/input_fuzz.py build/tools/zero3 --seed 7 --case 41      # replay one case, kept under --out

Prints its seed first and a replay command for every finding; exits 1 when there is one.
"""
import argparse
import concurrent.futures
import copy
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ASAN_EXIT, UBSAN_EXIT = 86, 87
REPLAY_LIVENESS_VERDICT = "replay found ranks that would hang or mix up collectives"
SANITIZER_ENV = {
    # A sanitizer report must not look like "exit 1, bad input": give each its own exit code.
    "ASAN_OPTIONS": f"exitcode={ASAN_EXIT}:allocator_may_return_null=1:detect_leaks=1",
    "UBSAN_OPTIONS": f"exitcode={UBSAN_EXIT}:halt_on_error=1:print_stacktrace=1",
}
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")

SPEC_SEEDS = {
    "gpt.json": {"zero3_model_spec": 1, "name": "gpt-fuzz", "kind": "gpt", "vocab": 16, "context": 8,
                 "layers": 1, "heads": 2, "width": 8},
    "mixed.json": {"zero3_model_spec": 1, "name": "mixed", "kind": "sequential", "input_width": 4,
                   "loss": "cross_entropy",
                   "layers": [{"type": "linear", "out": 8},
                              {"type": "repeat", "times": 2,
                               "layers": [{"type": "linear", "out": 8}, {"type": "gelu"}]},
                              {"type": "residual", "layers": [{"type": "moe", "experts": 3, "hidden": 4}]},
                              {"type": "scale", "shape": [1]},
                              {"type": "tied_linear", "tie_to": "layers.0", "transpose": True},
                              {"type": "linear", "out": 3}]},
    "zero-sized.json": {"zero3_model_spec": 1, "name": "zero-sized", "kind": "sequential", "input_width": 4,
                        "loss": "mse",
                        "layers": [{"type": "concat", "layers": [{"type": "linear", "out": 0}]},
                                   {"type": "linear", "out": 5}, {"type": "gelu"}, {"type": "linear", "out": 2}]},
    "broadcast-trap.json": {"zero3_model_spec": 1, "name": "broadcast-trap", "kind": "sequential", "input_width": 4,
                            "loss": "mse",
                            "layers": [{"type": "linear", "out": 4}, {"type": "scale", "shape": [4]},
                                       {"type": "linear", "out": 1},
                                       {"type": "sum_residual",
                                        "layers": [{"type": "raw_scale", "param": "layers.1.scale"}]}]},
}
CONFIG_SEEDS = {
    "full.json": {
        "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, "gradient_clipping": 1.0,
        "bf16": {"enabled": False},
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8,
                                                  "weight_decay": 0.1}},
        "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 500, "stage3_max_live_parameters": 1000,
                              "stage3_max_reuse_distance": 1000, "stage3_param_persistence_threshold": 10,
                              "reduce_bucket_size": 300, "overlap_comm": True,
                              "zero3_placeholder_policy": "error", "zero3_leaf_modules": ["moe"]}},
}
# Elements above which a mutated spec that loads is only inspected, not also trained.
TRAIN_ELEMENTS_MAX = 200_000
# Mutated specs train under this config: every parameter sharded, and MoE layers as leaves, since
# without that a rank-divergent model rightly ends in exit 3 (a collective mismatch).
SPEC_TRAIN_CONFIG = {"zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0,
                                           "zero3_leaf_modules": ["moe"]}}

BOUNDARY_VALUES = [0, -1, 1, 2, 3, 7, 2**20, 2**24 + 1, 2**30, 2**31 - 1, 2**31, 2**32 + 1, 2**53 + 1, 2**63 - 1, 2**63, -2**63, 2**64,
                   1e308, -1e308, 5e-324, 0.5, -0.0, 1.5, 1e-30, "", "x", "a" * 5000, "layers.0", "../x", True,
                   False, None, [], {}, [0], [-1, 2**40], {"a": 1}]


def fnv1a(data):
    value = 0xCBF29CE484222325
    for byte in data:
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


def compact_dump(value):
    """nlohmann::json::dump() of the same value: compact, keys sorted, UTF-8 unescaped."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def resign_checkpoint(directory):
    """Recomputes every shard checksum and then metadata_fnv1a, as a save would have written them."""
    path = os.path.join(directory, "metadata.json")
    try:
        with open(path, encoding="utf-8") as file:
            metadata = json.load(file)
        for entry in metadata.get("shard_files", []):
            shard = os.path.join(directory, str(entry.get("file", "")))
            if os.path.basename(shard) == shard[len(directory) + 1:] and os.path.isfile(shard):
                with open(shard, "rb") as file:
                    entry["fnv1a"] = fnv1a(file.read())
        body = {key: value for key, value in metadata.items() if key != "metadata_fnv1a"}
        metadata["metadata_fnv1a"] = fnv1a(compact_dump(body).encode())
        with open(path, "w", encoding="utf-8") as file:
            json.dump(metadata, file, indent=1, sort_keys=True, ensure_ascii=False)
    except (ValueError, AttributeError, TypeError, RecursionError, OSError):
        pass  # not JSON any more, or not an object: left as mutated


def json_slots(value, path=()):
    """Every (path) in the tree, the root included."""
    yield path
    if isinstance(value, dict):
        for key, child in value.items():
            yield from json_slots(child, path + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from json_slots(child, path + (index,))


def get_at(value, path):
    for key in path:
        value = value[key]
    return value


def deep_nest(rng):
    depth = rng.choice([64, 2000, 100000])
    return json.loads("[" * min(depth, 500) + "]" * min(depth, 500)) if depth <= 500 else ("DEEP", depth)


NUMBERS = [value for value in BOUNDARY_VALUES if isinstance(value, (int, float)) and not isinstance(value, bool)]
STRINGS = [value for value in BOUNDARY_VALUES if isinstance(value, str)]
# Mutation kinds and weights: most keep the value's type (a number stays a number), so that many
# mutants get past the schema checks to the checks behind them.
JSON_OPS = [("perturb", 3), ("same_type", 3), ("any_value", 2), ("delete", 1), ("add_key", 1), ("duplicate", 1),
            ("wrap", 0.5), ("nest", 0.5)]


def mutate_json(value, rng, log):
    slots = list(json_slots(value))
    leaves = [path for path in slots if not isinstance(get_at(value, path), (dict, list))]
    op = rng.choices([name for name, _ in JSON_OPS], weights=[weight for _, weight in JSON_OPS])[0]
    path = rng.choice(leaves if op in ("perturb", "same_type") and leaves else slots)
    where = "/" + "/".join(str(key) for key in path)
    parent = get_at(value, path[:-1]) if path else None
    current = get_at(value, path)
    is_number = isinstance(current, (int, float)) and not isinstance(current, bool)
    if op == "perturb" and is_number:
        new = rng.choice([current + 1, current - 1, -current, current * 2**rng.randint(1, 40), current + 0.5,
                          current * 1000003])
        log.append(f"{where}: {current!r} -> {new!r}")
        return set_at(value, path, new)
    if op == "same_type" and (is_number or isinstance(current, (str, bool))):
        pool = NUMBERS if is_number else STRINGS if isinstance(current, str) else [not current]
        new = copy.deepcopy(rng.choice(pool))
        log.append(f"{where}: {short(current)} -> {short(new)}")
        return set_at(value, path, new)
    if op == "delete" and path:
        log.append(f"{where}: deleted")
        del parent[path[-1]]
        return value
    if op == "add_key" and isinstance(current, dict):
        key = rng.choice(["extra", "type", "layers", "stage", "zero3_model_spec", "name", ""])
        new = rng.choice(BOUNDARY_VALUES)
        log.append(f"{where}: key {key!r} = {short(new)}")
        current[key] = copy.deepcopy(new)
        return value
    if op == "duplicate" and isinstance(current, list) and current:
        index = rng.randrange(len(current))
        log.append(f"{where}: element {index} repeated")
        current.insert(index, copy.deepcopy(current[index]))
        return value
    if op == "wrap":
        log.append(f"{where}: wrapped in an array")
        return set_at(value, path, [current])
    if op == "nest":
        new = deep_nest(rng)
        log.append(f"{where}: nested {new[1] if isinstance(new, tuple) else 'deeply'}")
        return set_at(value, path, new)
    new = copy.deepcopy(rng.choice(BOUNDARY_VALUES))
    log.append(f"{where}: {short(current)} -> {short(new)}")
    return set_at(value, path, new)


# A config mutant is trained (gpt-tiny, 2 ranks, 2 steps). Some valid configs are too big to train
# in the time or memory one case has: a micro-batch in the tens of thousands needs tens of GB
# (65,536 was OOM-killed at 24 GB after a minute), and gradient accumulation over 32,768
# micro-batches is 65,536 micro-steps (past 60 s under ASan; CI seed 992253650 case 217). Such a
# mutant is trained at the cap instead, and the log says so. Values past the schema's bound (2^20,
# core/training/train_config.cc) are left as they are: their refusal (exit 1) is what they test.
# zero3 has no pre-flight memory check yet (a run that does not fit is killed by the OS).
TRAINED_CAPS = {"train_micro_batch_size_per_gpu": (1024, "memory"), "gradient_accumulation_steps": (64, "time")}
SCHEMA_MAX = 1 << 20


def clamp_trainable_but_huge(path, log):
    try:
        config = json.load(open(path))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return
    if not isinstance(config, dict):
        return
    clamped = False
    for key, (cap, reason) in TRAINED_CAPS.items():
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and cap < value <= SCHEMA_MAX:
            config[key] = cap
            clamped = True
            log.append(f"/{key}: {value} trained as {cap} ({reason})")
    if clamped:
        with open(path, "w") as file:
            json.dump(config, file, indent=1)


def mutation_count(rng):
    return rng.choices([1, 2, 3], weights=[7, 2, 1])[0]


def short(value):
    text = json.dumps(value) if not isinstance(value, tuple) else f"<nest {value[1]}>"
    return text if len(text) <= 40 else text[:37] + "..."


def set_at(value, path, new):
    if not path:
        return new
    get_at(value, path[:-1])[path[-1]] = new
    return value


def render_json(value):
    """Text of a mutated JSON value; ("DEEP", n) stands for n nested arrays (too deep for json.dumps)."""
    placeholder = "\"__zero3_deep__\""
    deep = []

    def strip(node):
        if isinstance(node, tuple):
            deep.append(node[1])
            return "__zero3_deep__"
        if isinstance(node, dict):
            return {key: strip(child) for key, child in node.items()}
        if isinstance(node, list):
            return [strip(child) for child in node]
        return node

    text = json.dumps(strip(value), indent=1)
    for depth in deep:
        text = text.replace(placeholder, "[" * depth + "]" * depth, 1)
    return text.encode()


def mutate_bytes(data, rng, log):
    data = bytearray(data)
    op = rng.choice(["flip", "set", "truncate", "insert", "delete", "repeat"])
    if not data:
        op = "insert"
    at = rng.randrange(len(data) + 1 if op == "insert" else len(data))
    if op == "flip":
        bit = rng.randrange(8)
        data[at] ^= 1 << bit
        log.append(f"byte {at}: bit {bit} flipped")
    elif op == "set":
        data[at] = rng.choice([0, 0xFF, 0x7F, 0x80, ord('"'), ord("{"), ord("9"), ord("-")])
        log.append(f"byte {at}: set to {data[at]:#x}")
    elif op == "truncate":
        del data[at:]
        log.append(f"cut at byte {at}")
    elif op == "insert":
        chunk = bytes(rng.choice(b'{}[]",:0123456789-eE.tfn \x00\xff') for _ in range(rng.randint(1, 8)))
        data[at:at] = chunk
        log.append(f"byte {at}: inserted {chunk!r}")
    elif op == "delete":
        length = rng.randint(1, 16)
        del data[at:at + length]
        log.append(f"bytes {at}..{at + length}: deleted")
    else:
        length = rng.randint(1, 64)
        data[at:at] = data[at:at + length]
        log.append(f"bytes {at}..{at + length}: repeated")
    return bytes(data)


def mutate_file(path, rng, log):
    with open(path, "rb") as file:
        data = file.read()
    if path.endswith(".json") and rng.random() < 0.7:
        try:
            value = json.loads(data)
        except ValueError:
            value = None
        if value is not None:
            for _ in range(mutation_count(rng)):
                value = mutate_json(value, rng, log)
            data = render_json(value)
            with open(path, "wb") as file:
                file.write(data)
            return
    for _ in range(mutation_count(rng)):
        data = mutate_bytes(data, rng, log)
    with open(path, "wb") as file:
        file.write(data)


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


class Fuzz:
    def __init__(self, zero3, work, timeout):
        self.zero3 = zero3
        self.work = work
        self.timeout = timeout
        self.env = dict(os.environ, **SANITIZER_ENV)
        self.lock = threading.Lock()
        self.exits = {}  # (input kind, command) -> {exit code: commands}

    def run(self, args, cwd):
        try:
            result = subprocess.run([self.zero3] + args, cwd=cwd, env=self.env, capture_output=True, text=True,
                                    errors="replace", timeout=self.timeout)
            return result.returncode, result.stdout, result.stderr
        except subprocess.TimeoutExpired:
            return None, "", f"no exit within {self.timeout} s"

    def make_seeds(self):
        """Seed inputs, each valid: checked by running the commands on them unmutated."""
        seeds = os.path.join(self.work, "seeds")
        os.makedirs(seeds)
        for name, value in {**SPEC_SEEDS, **CONFIG_SEEDS, "spec-train.json": SPEC_TRAIN_CONFIG}.items():
            with open(os.path.join(seeds, name), "w") as file:
                json.dump(value, file, indent=1)
        for model, args in [("gpt-tiny", []), ("moe-tiny", ["--config", os.path.join(seeds, "full.json")])]:
            self.must_pass(["train", "--backend", "sim", "--model", model, "--ranks", "2", "--steps", "2",
                            "--record", os.path.join(seeds, f"{model}.trace.json")] + args, seeds)
        shutil.copy(os.path.join(ROOT, "traces/models/gpt2-124m.json"), os.path.join(seeds, "gpt2-124m.trace.json"))
        self.must_pass(["train", "--backend", "sim", "--model", "gpt-tiny", "--ranks", "2", "--steps", "1",
                        "--save-checkpoint", os.path.join(seeds, "checkpoint")], seeds)
        before = open(os.path.join(seeds, "checkpoint", "metadata.json"), "rb").read()
        probe = os.path.join(self.work, "probe")
        shutil.copytree(os.path.join(seeds, "checkpoint"), probe)
        resign_checkpoint(probe)
        if json.loads(open(os.path.join(probe, "metadata.json")).read()) != json.loads(before):
            sys.exit("input_fuzz: re-signing an unchanged checkpoint changed it: the checksum rule differs from "
                     "core/training/checkpoint.cc's")
        shutil.rmtree(probe)
        self.seeds = seeds
        self.inputs = {
            "spec": sorted(SPEC_SEEDS),
            "config": sorted(CONFIG_SEEDS) + ["bf16.json", "mixtral-leaf.json"],
            "trace": ["gpt-tiny.trace.json", "moe-tiny.trace.json", "gpt2-124m.trace.json"],
            "checkpoint": ["checkpoint"],
        }
        for name in ["bf16.json", "mixtral-leaf.json"]:
            shutil.copy(os.path.join(ROOT, "traces/configs", name), os.path.join(seeds, name))
        for kind, names in self.inputs.items():
            for name in names:
                for args in self.commands(kind, os.path.join(seeds, name), os.path.join(self.work, "seed-out")):
                    self.must_pass(args, seeds)

    def must_pass(self, args, cwd):
        code, _, err = self.run(args, cwd)
        if code != 0:
            sys.exit(f"input_fuzz: a seed input failed (exit {code}): zero3 {' '.join(args)}\n{err[-2000:]}")
        shutil.rmtree(os.path.join(self.work, "seed-out"), ignore_errors=True)

    @staticmethod
    def commands(kind, path, out):
        if kind == "spec":
            return [["inspect", path]]
        if kind == "config":
            # Not moe-tiny: without its leaf module a rank-divergent model rightly ends in exit 3.
            return [["train", "--backend", "sim", "--model", "gpt-tiny", "--ranks", "2", "--steps", "2",
                     "--config", path]]
        if kind == "trace":
            return [["replay", path, "--ranks", "3", "--timeline", out + ".timeline.json"]]
        return [["train", "--backend", "sim", "--model", "gpt-tiny", "--ranks", "3", "--steps", "2",
                 "--load-checkpoint", path],
                ["consolidate", path, out]]

    def case(self, seed, number):
        rng = random.Random(f"{seed}:{number}")
        kind = ["spec", "config", "trace", "checkpoint"][number % 4]
        name = rng.choice(self.inputs[kind])
        case_dir = os.path.join(self.work, f"case-{number}")
        os.makedirs(case_dir)
        target = os.path.join(case_dir, name)
        log = []
        if kind == "checkpoint":
            shutil.copytree(os.path.join(self.seeds, name), target)
            files = sorted(os.listdir(target))
            mutate_file(os.path.join(target, rng.choice(files)), rng, log)
            if rng.random() < 0.75:
                resign_checkpoint(target)
                log.append("re-signed")
        else:
            shutil.copy(os.path.join(self.seeds, name), target)
            mutate_file(target, rng, log)
            if kind == "config":
                clamp_trainable_but_huge(target, log)
        findings = []
        out = os.path.join(case_dir, "out")
        commands = self.commands(kind, target, out)
        for args in commands:
            found, code, stdout = self.judge(kind, target, args, out)
            findings += found
            if kind == "spec" and code == 0 and not findings:
                findings += self.train_spec(target, stdout)
        if not findings:
            shutil.rmtree(case_dir)
        return number, kind, name, log, findings

    def train_spec(self, target, inspect_output):
        """A mutated spec that loads and is small is trained too: 3 ranks, ZeRO-3. Not one that reads
        a raw parameter handle (raw_scale, the broadcast trap): under the default placeholder policy
        ZeRO-3 refuses that read with exit 2, which is the designed answer, not a bad-input one."""
        match = re.search(r"parameters, (\d+) elements", inspect_output)
        if not match or int(match.group(1)) > TRAIN_ELEMENTS_MAX:
            return []
        with open(target, "rb") as file:
            if b"raw_scale" in file.read():
                return []
        return self.judge("spec", target, ["train", "--backend", "sim", "--model", target, "--ranks", "3",
                                           "--steps", "2", "--micro-batch", "2",
                                           "--config", os.path.join(self.seeds, "spec-train.json")], None)[0]

    def judge(self, kind, target, args, out):
        """(findings, exit code, stdout) of one command on a mutant."""
        code, stdout, err = self.run(args, os.path.dirname(target))
        with self.lock:
            key = (kind, args[0])
            self.exits.setdefault(key, {})
            self.exits[key][code] = self.exits[key].get(code, 0) + 1
        return self.findings(kind, target, args, out, code, err), code, stdout

    @staticmethod
    def findings(kind, target, args, out, code, err):
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
    print(f"input_fuzz: seed {seed}; replay: tools/input_fuzz.py {args.zero3} --seed {seed} --runs {args.runs}",
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
                          f"{kept}; replay: tools/input_fuzz.py {args.zero3} --seed {seed} --case {number}")
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
