#!/usr/bin/env python3
"""The findings' standalone scripts (tools/zero3py/runners/repro.py) written and run for real:

  * every layer type of MODEL_SPEC.md's sequential kind, under each target (deepspeed, fsdp2,
    torch), in healthy cases, and ZeRO's and FSDP2's levers (ZeRO stages 1 and 2, offloading, hpZ,
    activation checkpointing: lever_cases): the runner agrees with its reference, and the script
    (asked to check a divergence) exits 0, and its plain-torch reference gives the runner's reference
    numbers (losses, as each step's mean of its micro-steps', gradient norms) to 1e-6;
  * the saved findings in traces/findings/ (DeepSpeed 0.19.8) and FSDP2's (an MoE leaf whose
    ranks route to different experts: silent, and loud; a zero-sized weight's empty reduce-scatter)
    give scripts that verify_repro accepts: run alone as their Run: line says, they exit 1 and
    print the signature they matched;
  * a saved MoE finding whose routing needs zero3's own weights and data (fsdp2-5-crash of
    traces/findings/campaigns/fsdp2-300-seed-343386226): its seed-drawn script does not reproduce,
    and the runner's write_repro then answers a verified script with the case's exact weights and
    data as literals (bit for bit), within the line cap;
  * `KeyError: 0` is matched on its type and the function that raised it, never on the digit;
  * a script that does not reproduce its answer is not kept (verify_repro removes it, says why);
  * reference_disagreement and reference_error verdicts get no script (Unsupported), nor does a bf16
    case under any target (its reference would need zero3's mixed precision: past the line cap);
  * at most 60 lines (LINE_CAP, the issue's bound for a shrunk case) for every script this test
    runs, every shrunk finding's of traces/findings/HISTORY.md (shrunk_findings, every target and verdict kind), and
    every script of a generated shrunk case of at most 4 layers, nested ones counted (the sweep:
    random cases, with random levers, x targets x expectations; larger cases, 5-8 layers, only print
    their counts);
    every swept script compiles and keeps its lines within 120 characters.

The cases are written from each script's own `model` and DATA (the weights and data the script
draws from the case's seed), so that the runner and the script train the same numbers.

    tools/e2e/repro_test.py [--python VENV_PYTHON] [--only NAME_FRAGMENT] [--keep DIR]

Without --python it uses the venv of tools/lib/diff_venv.sh (installing it when missing) and
re-executes itself there. Exit 0 when all hold, 1 otherwise.
"""
import argparse
import importlib.util
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

from repro_test_levers import LEVER_LINES, ZERO_LEVERS, lever_cases, random_levers

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tools/, above this room
ROOT = os.path.dirname(TOOLS)
FINDINGS = os.path.join(ROOT, "traces", "findings")
VENV = os.environ.get("ZERO3_DIFF_VENV", os.path.join(os.environ.get("XDG_CACHE_HOME")
                                                      or os.path.expanduser("~/.cache"),
                                                      "zero3", "diff-venv"))
# The bound on a shrunk case's script, asserted for every script this test writes of a
# case of at most SHRUNK_LAYERS layers (nested ones counted); larger swept cases only print theirs.
LINE_CAP = 60
SHRUNK_LAYERS = 4
WORLD = 2
# What a process aborted by gloo at exit prints (a flake of torch.multiprocessing under load).


def reexec_in_venv(args):
    if args.python or os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    install = f"source {TOOLS}/lib/diff_venv.sh && zero3_install_diff_venv"
    if subprocess.run(["bash", "-c", install]).returncode != 0:
        sys.exit("repro_test: the runners' venv did not install (tools/lib/diff_venv.sh said why)")
    python = os.path.join(VENV, "bin", "python")
    os.execv(python, [python, os.path.abspath(__file__), *sys.argv[1:], "--python", python])


# -- cases ----------------------------------------------------------------------------------------
def spec(input_width, loss, layers):
    return {"zero3_model_spec": 1, "name": "repro-test", "kind": "sequential", "input_width": input_width,
            "loss": loss, "layers": layers}


def token_spec(vocab, context, layers):
    """A token model: ids [B, context] in, layers.0 an embedding, one logit per vocab entry out."""
    return {"zero3_model_spec": 1, "name": "repro-test", "kind": "sequential", "vocab": vocab, "context": context,
            "loss": "cross_entropy", "layers": layers}


def L(out, **more):  # noqa: N802  a linear layer
    return {"type": "linear", "out": out, **more}


def attention(heads, **more):
    return {"type": "causal_self_attention", "heads": heads, **more}


DENSE = spec(6, "cross_entropy", [L(8), {"type": "layer_norm"}, {"type": "gelu"}, {"type": "unused_linear", "out": 5},
                                  {"type": "swiglu", "hidden": 4, "bias": True}, L(8, requires_grad=False),
                                  {"type": "rms_norm"}, {"type": "relu"}, L(3, bias=False)])
BROADCAST = spec(4, "mse", [
    {"type": "concat", "layers": [L(2)]}, {"type": "residual", "layers": [{"type": "scale", "shape": [6, 1]},
                                                                          {"type": "relu"}]},
    {"type": "sum_residual", "layers": [L(3)]}, {"type": "repeat", "times": 2, "layers": [L(6), {"type": "gelu"}]},
    {"type": "bias", "shape": [1]}, {"type": "scale", "shape": [6]}, L(2)])
READS = spec(3, "mse", [L(4), {"type": "tied_linear", "tie_to": "layers.0", "transpose": True, "bias": True},
                        {"type": "scale", "shape": [3]}, {"type": "raw_scale", "param": "layers.2.scale"},
                        {"type": "raw_scale", "shape": [3, 1]}, L(2)])
# FSDP2 shards each module apart: a tie or a raw read of another module's parameter reaches it
# inside one unit only (a leaf by name, as FSDP2 users group tied modules).
READS_FSDP2 = spec(3, "mse", [
    {"type": "concat", "layers": [L(4), {"type": "tied_linear", "tie_to": "layers.0.layers.0", "transpose": True,
                                         "bias": True}, {"type": "scale", "shape": [3]},
                                  {"type": "raw_scale", "param": "layers.0.layers.2.scale"}]},
    {"type": "raw_scale", "shape": [6, 1]}, L(2)])
MOE = spec(6, "mse", [L(6), {"type": "moe", "experts": 2, "hidden": 4}, L(2)])
# A small GPT: attention and an MLP in residual blocks, the head tied to the embedding. FSDP2 shards
# the embedding and the head's reader apart, so there the head is a linear layer of its own. No qkv
# bias: the key bias moves every score of a row alike, so its gradient is rounding noise, which
# AdamW steps by up to lr either way (PROTOCOL.md, "Tolerances"), past this test's weights check.
TOKENS = token_spec(13, 4, [{"type": "embedding", "dim": 8},
                            {"type": "residual", "layers": [{"type": "layer_norm"}, attention(2, bias=False)]},
                            {"type": "residual", "layers": [{"type": "layer_norm"}, L(16), {"type": "gelu"}, L(8)]},
                            {"type": "layer_norm"}, {"type": "tied_linear", "tie_to": "layers.0"}])
TOKENS_FSDP2 = {**TOKENS, "layers": TOKENS["layers"][:-1] + [L(13)]}
# Attention in a feature model: each row a sequence of one token (its softmax is 1, whose gradient
# is exactly 0: q and k get none), proj without its bias.
ATTENTION_ROWS = spec(6, "mse", [L(4), attention(2, proj_bias=False), {"type": "gelu"}, L(2)])
HSDP = spec(6, "mse", [L(8), {"type": "layer_norm"}, {"type": "gelu"}, L(3)])


def healthy_cases():
    """(name, target, model, settings changes, the signature the script checks): every layer type
    of the sequential kind under every target, in healthy cases (MoE: every rank routes to the
    same experts; raw reads the way each framework serves them)."""
    raws = {"torch": [("cached_reference", False), ("parent_attribute", True)],
            "deepspeed": [("external_parameter", False)], "fsdp2": [("own_forward", False)]}
    cases = []
    for target in ("torch", "deepspeed", "fsdp2"):
        cases.append((f"{target}-dense", target, DENSE, {"gas": 2, "gradient_clipping": 1.0},
                      "silent_divergence in the loss"))
        cases.append((f"{target}-broadcast", target, BROADCAST, {"gradient_clipping": 0.0},
                      "silent_divergence in the final weights"))
        for access, gradient in raws[target]:
            cases.append((f"{target}-reads-{access}", target, READS_FSDP2 if target == "fsdp2" else READS,
                          {"raw_access": access, "raw_gradient": gradient, "gradient_clipping": 0.5,
                           "leaf_modules": ["layers.0"] if target == "fsdp2" else []},
                          "silent_divergence in the gradient norm"))
        cases.append((f"{target}-moe", target, MOE, {"leaf_modules": [] if target == "torch" else ["moe"],
                                                     "micro_batch": 4, "steps": 1, "route": "same"},
                      "silent_divergence in the loss"))
        # Token models: the attention a leaf (one DeepSpeed gather, one FSDP2 unit) where the framework shards.
        cases.append((f"{target}-tokens", target, TOKENS_FSDP2 if target == "fsdp2" else TOKENS,
                      {"gas": 2, "leaf_modules": [] if target == "torch" else ["causal_self_attention"]},
                      "silent_divergence in the gradient norm" if target == "deepspeed" else
                      "silent_divergence in the loss"))
        cases.append((f"{target}-attention-rows", target, ATTENTION_ROWS, {}, "silent_divergence in the loss"))
    cases.append(("fsdp2-hsdp", "fsdp2", HSDP, {"world": 4, "shard_group_size": 2}, "silent_divergence in the loss"))
    return cases + lever_cases(TOKENS, TOKENS_FSDP2, MOE, HSDP)


def settings_of(model, changes, seed=7):
    from zero3py.runners.case import default_settings
    changes = dict(changes)
    settings = default_settings(model, changes.pop("world", WORLD), changes.pop("steps", 2), changes.pop("seed", seed),
                                changes.pop("micro_batch", 2), changes.pop("gas", 1))
    settings["timeout_s"] = 60
    for key in ("leaf_modules", "shard_group_size") + ZERO_LEVERS:
        if key in changes:
            settings["zero"][key] = changes.pop(key)
    if "activation_checkpointing" in changes:
        settings["activation_checkpointing"] = changes.pop("activation_checkpointing")
    for key in ("raw_access", "raw_gradient"):
        if key in changes:
            settings["torch"][key] = changes.pop(key)
    if "gradient_clipping" in changes:
        settings["gradient_clipping"] = changes.pop("gradient_clipping")
    changes.pop("route", None)
    assert not changes, changes
    return settings


def load_script(path):
    """The script as a module (its main block does not run): its `model` and DATA."""
    loader = importlib.util.spec_from_file_location(f"repro_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


class Cases:
    """Case directories written from the scripts' own weights and data."""

    def __init__(self, work, python, versions):
        self.work, self.python, self.versions = work, python, versions

    def script(self, directory, target, answer, signature, name="repro.py", exact=False):
        from zero3py.runners.repro import write_repro
        versions = self.versions.get(target, self.versions.get("sweep"))
        return write_repro(directory, answer, os.path.join(directory, name), versions or "versions unknown", target,
                           signature, self.python, exact=exact)

    def write(self, name, target, settings, route=None):
        """The case directory: case.json, and init/data from the script's `model` and DATA.
        `route` ("same", "disjoint", "split") re-draws the seed until the MoE's top-1 choices at
        the initial weights are as asked on every micro-step: every rank the same experts; each
        rank one expert, another than the other rank's; or one rank both, the other one."""
        from zero3py.runners.case import write_case
        directory = os.path.join(self.work, name)
        os.makedirs(directory, exist_ok=True)
        for attempt in range(400):
            with open(os.path.join(directory, "case.json"), "w") as out:
                json.dump(settings, out, indent=1)
            draft = self.script(directory, target, {"status": "ok"}, "silent_divergence in the loss", "draft.py")
            module = load_script(draft["path"])
            os.remove(draft["path"])
            model, batches = module.model, module.DATA
            if route is None or routes_as(model, batches, settings, route):
                break
            settings["seed"] += 1
        else:
            raise RuntimeError(f"{name}: no seed routes {route}")
        write_case(directory, settings, *case_tensors(model, batches))
        return directory


def case_tensors(model, batches):
    """(init, data) of a case directory: a script's `model` and DATA under zero3's names."""
    init = {n: p.detach().clone() for n, p in model.named_parameters()}
    data = {}
    for s, step in enumerate(batches):
        for m, (x, y) in enumerate(step):  # a token model's ids as F32, as zero3 writes them
            data[f"step{s}.micro{m}.inputs"], data[f"step{s}.micro{m}.targets"] = x.float(), y.float()
    return init, data


def same_bits(module, init, data):
    """What of an exact-data script's `model` and DATA differs from the case's tensors (float32
    bit patterns, shapes; targets as values): [] when they are the case's, bit for bit."""
    import torch
    bits = lambda t: t.detach().contiguous().view(torch.int32)  # noqa: E731
    off = [n for n, p in module.model.named_parameters() if n not in init or p.shape != init[n].shape
           or not torch.equal(bits(p), bits(init[n]))]
    if set(init) != {n for n, _ in module.model.named_parameters()}:
        off.append("the parameter names")
    found = {}
    for s, step in enumerate(module.DATA):
        for m, (x, y) in enumerate(step):
            found[f"step{s}.micro{m}.inputs"], found[f"step{s}.micro{m}.targets"] = x, y
    if set(found) != set(data):
        return off + [f"the batches: {sorted(found)} against {sorted(data)}"]
    for name, tensor in found.items():
        ids = not tensor.is_floating_point()  # a token model's: compared as values, as the runner reads them
        if name.endswith(".inputs") and (tensor.shape != data[name].shape or (
                not torch.equal(tensor.float(), data[name]) if ids else
                tensor.dtype != torch.float32 or not torch.equal(bits(tensor), bits(data[name])))):
            off.append(name)
        if name.endswith(".targets") and (tensor.shape != data[name].shape or not torch.equal(tensor.float(),
                                                                                              data[name])):
            off.append(name)
    return off


def routes_as(model, batches, settings, route):
    import torch
    moe = next(m for m in model.modules() if type(m).__name__ == "Moe")
    rows, world = settings["micro_batch"], settings["world"]
    captured = []
    hook = moe.register_forward_pre_hook(lambda module, args: captured.append(args[0]))
    with torch.no_grad():
        for step in batches:
            for x, _ in step:
                for rank in range(world):
                    captured.clear()
                    model(x[rank * rows:(rank + 1) * rows])
                    choice = moe.gate(captured[0]).argmax(-1)
                    yield_set = set(choice.tolist())
                    if rank == 0:
                        first = yield_set
                    elif route == "same" and (yield_set != first or len(first) < len(moe.experts)):
                        hook.remove()
                        return False
                    elif route == "disjoint" and (len(first) != 1 or len(yield_set) != 1 or first == yield_set):
                        hook.remove()
                        return False
                    elif route == "split" and not (len(first) == 2 and len(yield_set) == 1):
                        hook.remove()
                        return False
    hook.remove()
    return True


# -- the harness's verdict, as props/target/target_verdict.cc judges an answer ---------------------------
def stable_fragment(message):
    found = re.search(r"\b[A-Z][A-Z_]{7,}\b", message)
    if found:
        return found.group()
    runs = re.findall(r"[A-Za-z][A-Za-z ]{7,}[A-Za-z]", message)
    return max(runs, key=len) if runs else message[:80]


def signature_of(answer):
    status = answer["status"]
    if status == "crash":
        for rank in answer["ranks"]:
            if rank["state"] == "exception":
                return f"crash {rank['exception_type']}: {stable_fragment(rank['message'])} at {rank.get('where', '')}"
            if rank["state"] == "signal":
                return f"crash {rank['signal']}"
            if rank["state"] == "exit":
                return "crash exit"
        return "crash"
    if status == "hang":
        return "hang"
    if status != "ok":
        return status
    reference = answer["reference"]
    if "error" in reference:
        return "reference_error"
    ours, ref, probe = answer["framework"], reference, reference.get("order_probe", reference)
    for step, (a, b) in enumerate(zip(ours["losses"], ref["losses"])):
        spread = 10 * abs(probe["losses"][step] - b)
        if not abs(a - b) <= 1e-5 * max(abs(b), 1e-12) + spread:
            return "silent_divergence in the loss"
        c, d = ours["grad_norms"][step], ref["grad_norms"][step]
        if not abs(c - d) <= 1e-3 * abs(d) + 1e-5 + 10 * abs(probe["grad_norms"][step] - d):
            return "silent_divergence in the gradient norm"
    from zero3py.oracle.compare import weight_errors
    from zero3py.safetensors_io import read_safetensors
    initial = read_safetensors(os.path.join(answer["case"], "init.safetensors"))
    errors = weight_errors(read_safetensors(ref["weights"]), read_safetensors(ours["weights"]), initial)
    if isinstance(errors, str) or max(errors.values(), default=0.0) > 1e-3:
        return "silent_divergence in the final weights"
    return "agree"


# -- running scripts ------------------------------------------------------------------------------
def run_copy(path):
    """Runs a copy of the script as verify_repro does (the copy is removed unless it reproduces),
    -> verify_repro's answer and the script's full output."""
    from zero3py.runners.repro import verify_repro
    copy = path.replace(".py", "_run.py")
    text = open(path).read().replace(f" {os.path.basename(path)}\n", f" {os.path.basename(copy)}\n", 1)
    with open(copy, "w") as out:
        out.write(text)
    return verify_repro(copy)


def numbers_after(label, output):
    found = re.search(rf"^reference {label}: (\[.*\])$", output, re.M)
    return json.loads(found.group(1).replace("'", '"')) if found else None


def check_lines(name, lines, failures, counts):
    counts.append(lines)
    if lines > LINE_CAP:
        failures.append(f"{name}: {lines} lines (the cap is {LINE_CAP})")


def check_healthy(cases_obj, cases, runners, failures, report, counts):
    for name, target, directory, signature in cases:
        answer = runners[target].ask(directory)
        verdict = signature_of(answer)
        if verdict != "agree":
            failures.append(f"{name}: the runner does not agree with its reference ({verdict}): "
                            f"{json.dumps(answer)[:1500]}")
            continue
        written = cases_obj.script(directory, target, {"status": "ok"}, signature)
        started = time.monotonic()
        check = run_copy(written["path"])
        if "run twice" in check["why"]:  # verify_repro ran it again after gloo's abort at exit: said here
            print(f"  {name}: {check['why'][:200]}", flush=True)
        label = "losses" if signature.endswith("loss") else "gradient norms"
        ours = numbers_after(label, check["output_tail"])
        if ours and label == "losses":  # the script's are per micro-step: each step's mean of its GAS
            with open(os.path.join(directory, "case.json")) as file:
                gas = json.load(file)["gas"]
            ours = [sum(ours[s:s + gas]) / gas for s in range(0, len(ours), gas)]
        expected = answer["reference"]["losses" if label == "losses" else "grad_norms"]
        worst = max((abs(a - b) / max(abs(b), 1e-12) for a, b in zip(ours or [], expected)), default=0.0)
        report.append(f"  {name:32s} {written['lines']:3d} lines, exit {check['exit_code']}, "
                      f"{time.monotonic() - started:5.1f} s" + (f", reference {label} vs the runner's {worst:.1e}"
                                                                  if not signature.endswith("weights") else ""))
        print(report[-1], flush=True)
        check_lines(name, written["lines"], failures, counts)
        if check["exit_code"] != 0:
            failures.append(f"{name}: the script exits {check['exit_code']}, not 0: "
                            f"{check['why']}\n{check['output_tail'][-2500:]}")
        elif not signature.endswith("weights") and (ours is None or len(ours) != len(expected) or worst > 1e-6):
            failures.append(f"{name}: the script's reference {label} {ours} differ from the runner's {expected}")


def verify_finding(name, target, directory, answer, cases, failures, report, counts, expect_in=None, output_has=()):
    """write_repro + verify_repro for a finding: the script must be kept (exit 1, `reproduced:`)."""
    from zero3py.runners.repro import verify_repro
    signature = signature_of(answer)
    shown = signature + " ".join(rank.get("message", "") for rank in answer.get("ranks", []))
    if expect_in and expect_in not in shown:
        failures.append(f"{name}: the runner's verdict is {signature!r}, expected one with {expect_in!r}: "
                        f"{json.dumps(answer)[:1500]}")
        return None
    written = cases.script(directory, target, answer, signature)
    check = verify_repro(written["path"])
    report.append(f"  {name:32s} {written['lines']:3d} lines, {signature[:70]!r}: "
                  f"{'verified' if check['verified'] else 'NOT verified'} in {check['seconds']} s; expect "
                  f"{written['expect']!r}")
    print(report[-1], flush=True)
    check_lines(name, written["lines"], failures, counts)
    if not check["verified"] or not os.path.exists(written["path"]):
        failures.append(f"{name}: not verified: {check['why']}\n{check['output_tail'][-3000:]}")
    missing = [text for text in output_has if text not in check["output_tail"]]
    if check["verified"] and missing:
        failures.append(f"{name}: its output lacks {missing}:\n{check['output_tail'][-1500:]}")
    return written, check


# A saved finding that needs its case's very numbers: FSDP2's fsdp2-5-crash (campaign fsdp2-300-seed-343386226),
# an MoE leaf whose ranks route to different experts only with zero3's weights and data (rank 0 to both, rank 1
# to expert 1: gloo aborts in the reduce-scatter); its seed-drawn script routes alike and every rank finishes.
# The case.json is the saved one; its init and data are what zero3 materialises for it (`zero3 fuzz --target
# fsdp2 --replay .../case.json` writes them into replay/), each float32 as its shortest literal: name -> (shape,
# values).
EXACT_CASE = os.path.join(ROOT, "traces", "findings", "campaigns", "fsdp2-300-seed-343386226", "fsdp2-5-crash",
                          "case.json")
EXACT_INIT = {"layers.0.gate.weight": ([2, 1], [-0.30388367, -0.122751564]), "layers.0.gate.bias": ([2], [0.0, 0.0]),
              "layers.0.experts.0.fc.weight": ([1, 1], [1.5170327]), "layers.0.experts.0.fc.bias": ([1], [0.0]),
              "layers.0.experts.0.proj.weight": ([1, 1], [-0.29526812]), "layers.0.experts.0.proj.bias": ([1], [0.0]),
              "layers.0.experts.1.fc.weight": ([1, 1], [-0.6993347]), "layers.0.experts.1.fc.bias": ([1], [0.0]),
              "layers.0.experts.1.proj.weight": ([1, 1], [-1.696807]), "layers.0.experts.1.proj.bias": ([1], [0.0])}
EXACT_DATA = {"step0.micro0.inputs": ([4, 1], [-0.122256115, 0.07947265, 0.35779092, 0.26424035]),
              "step0.micro0.targets": ([4], [0.0, 0.0, 0.0, 0.0])}


def check_exact_data(cases, runner, failures, report, counts, work):
    """The saved MoE finding above: its seed-drawn script does not reproduce (the premise), and the
    runner's write_repro request then answers a verified script holding the case's exact weights
    and data (BATCHES, INIT), within LINE_CAP lines, whose `model` and DATA are the case's bit for bit."""
    import torch
    from zero3py.runners.case import write_case
    from zero3py.runners.repro import verify_repro
    name, directory = "fsdp2-moe-exact-data", os.path.join(work, "fsdp2-moe-exact-data")
    with open(EXACT_CASE) as file:
        settings = json.load(file)
    tensors = [{n: torch.tensor(values).view(shape) for n, (shape, values) in table.items()}
               for table in (EXACT_INIT, EXACT_DATA)]
    write_case(directory, settings, *tensors)
    answer = runner.ask(directory)
    signature = signature_of(answer)
    if not signature.startswith("crash"):
        failures.append(f"{name}: the runner's verdict is {signature!r}, expected a crash: {json.dumps(answer)[:1500]}")
        return
    seeded = cases.script(directory, "fsdp2", answer, signature, "seeded.py")
    check = verify_repro(seeded["path"])
    if check["verified"]:
        failures.append(f"{name}: the seed-drawn script reproduces, so this case no longer tests the exact form: "
                        f"{check['why']}")
        return
    path = os.path.join(directory, "repro.py")
    got = runner.write_repro(directory, answer, path, signature)
    text = open(path).read() if os.path.exists(path) else ""
    report.append(f"  {name:32s} {got.get('lines') or 0:3d} lines, {signature[:70]!r}: seeded: "
                  f"{check['why'][:60]!r}; exact: {got['status']}, "
                  f"{got.get('verification', {}).get('why', got.get('message', ''))[:80]!r}")
    print(report[-1], flush=True)
    if got["status"] != "ok" or not text or "\nINIT = " not in text or "\nBATCHES = " not in text:
        failures.append(f"{name}: no verified exact-data script: {json.dumps(got)[:2500]}\n{text}")
        return
    check_lines(name, got["lines"], failures, counts)
    off = same_bits(load_script(path), *tensors)
    if off:
        failures.append(f"{name}: the script's weights or data differ from the case's: {off}")


# -- the line count sweep -------------------------------------------------------------------------
def random_layers(rng, width, prefix, named, budget, keep_width=False, depth=0, first=0):
    """Random valid layers on `width` features, at most budget[0] of them (nested ones counted):
    -> (layers, output width). `named` collects parameter name -> shape, so that a later tie or
    raw read names a real earlier parameter; `keep_width` for a residual's or repeat's body;
    `first`: the index of the first (a token model's layers.0 is its embedding)."""
    layers = []
    while budget[0] > 0 and (not layers or rng.random() < 0.6):
        budget[0] -= 1
        name = f"{prefix}.{first + len(layers)}"
        kinds = ["linear", "unused_linear", "layer_norm", "gelu", "relu", "scale", "bias", "raw_scale", "moe",
                 "causal_self_attention", "rms_norm", "swiglu"]
        if depth < 2 and budget[0] > 0:
            kinds += ["residual", "sum_residual", "repeat"] + ([] if keep_width else ["concat"])
        ties = [n[:-len(".weight")] for n, shape in named.items() if n.endswith(".weight") and len(shape) == 2
                and shape[0] == width and (not keep_width or shape[1] == width)]
        if ties:
            kinds.append("tied_linear")
        reads = [n for n, shape in named.items() if (len(shape) == 1 or shape[1] == 1)
                 and (shape[0] == width or shape[0] == 1 or (width == 1 and not keep_width))]
        kind = rng.choice(kinds)
        layer, out = {"type": kind}, width
        if kind == "raw_scale" and keep_width and width == 1:
            kind, layer = "relu", {"type": "relu"}  # [n] on one feature widens to n
        if kind in ("scale", "bias") and keep_width and width == 1:
            kind, layer = "gelu", {"type": "gelu"}
        if kind in ("linear", "unused_linear"):
            layer["out"] = width if keep_width and kind == "linear" else rng.choice([1, 2, 3, 5])
            layer["bias"] = rng.random() < 0.7
            named[f"{name}.weight"] = [layer["out"], width]
            if layer["bias"]:
                named[f"{name}.bias"] = [layer["out"]]
            out = layer["out"] if kind == "linear" else width
        elif kind == "layer_norm":
            named[f"{name}.weight"], named[f"{name}.bias"] = [width], [width]
        elif kind == "rms_norm":
            named[f"{name}.weight"] = [width]
        elif kind == "swiglu":  # a hidden width of 0: zero-sized weights, which nothing later ties or reads
            layer.update(hidden=rng.choice([0, 2, 4]), **({"bias": True} if rng.random() < 0.4 else {}))
            for child, shape in (("gate", [layer["hidden"], width]), ("up", [layer["hidden"], width]),
                                 ("down", [width, layer["hidden"]])):
                if layer["hidden"]:
                    named[f"{name}.{child}.weight"] = shape
                    if layer.get("bias"):
                        named[f"{name}.{child}.bias"] = shape[:1]
        elif kind in ("scale", "bias") or (kind == "raw_scale" and (not reads or rng.random() < 0.4)):
            layer["shape"] = rng.choice([[width], [width, 1], [1]])
            named[f"{name}.{'bias' if kind == 'bias' else 'scale'}"] = layer["shape"]
        elif kind == "raw_scale":
            layer["param"] = rng.choice(reads)
            out = named[layer["param"]][0] if width == 1 else width
        elif kind == "moe":
            layer.update(experts=rng.choice([1, 2, 3]), hidden=rng.choice([2, 4]))
            named[f"{name}.gate.weight"] = [layer["experts"], width]
            for e in range(layer["experts"]):
                named[f"{name}.experts.{e}.fc.weight"] = [layer["hidden"], width]
                named[f"{name}.experts.{e}.proj.weight"] = [width, layer["hidden"]]
        elif kind == "tied_linear":
            layer.update(tie_to=rng.choice(ties), transpose=True, bias=rng.random() < 0.5)
            out = named[layer["tie_to"] + ".weight"][1]
        elif kind == "causal_self_attention":
            layer.update(heads=rng.choice([h for h in (1, 2, 3) if width % h == 0]), bias=rng.random() < 0.7,
                         proj_bias=rng.random() < 0.7)
            named[f"{name}.qkv.weight"], named[f"{name}.proj.weight"] = [3 * width, width], [width, width]
            for child, rows in (("qkv", 3 * width), ("proj", width)):
                if layer["bias" if child == "qkv" else "proj_bias"]:
                    named[f"{name}.{child}.bias"] = [rows]
        elif kind in ("gelu", "relu"):
            pass
        else:  # a container
            layer["layers"], inner = random_layers(rng, width, name + ".layers", named, budget,
                                                   kind in ("residual", "repeat"), depth + 1)
            if kind == "concat":
                out = width + inner
            if kind == "repeat":
                layer["times"] = rng.choice([2, 3])
        if kind in ("linear", "unused_linear", "scale", "bias", "moe", "causal_self_attention", "rms_norm",
                    "swiglu") and rng.random() < 0.15:
            layer["requires_grad"] = False
        layers.append(layer)
        width = out
    return layers, width


# The exact-data form is written for every fifth swept case only: the form's writer has no per-case
# branches the seeded sweep does not reach, and writing all 300 doubled this test's time in CI.
EXACT_SWEEP_EVERY = 5


def sweep_lines(cases, work, count=300, seed=1):
    """Writes scripts for `count` random shrunk cases (1-8 layers, every layer type, every raw
    access, W 1, 2 or 4 with HSDP blocks) x targets x expectations without running them: each must
    compile and keep its lines within 120 characters. Every EXACT_SWEEP_EVERY-th case also gets
    weights and data (its seeded script's) and every script again in the exact-data form (write_repro(exact=True)): each
    must compile within 120 characters, and one a case must hold those tensors bit for bit; their
    line counts are information (reproduce() keeps none over LINE_CAP). Every case is then written
    again with random ZeRO levers and checkpointed layer types (random_levers): each script must
    compile within 120 characters and take at most LEVER_LINES more than without them. -> ({(at
    most SHRUNK_LAYERS layers, target, expectation): [line counts]}, {at most SHRUNK_LAYERS layers:
    (lines, the longest script's description)}, failures, {at most SHRUNK_LAYERS layers: [the
    exact-data forms' line counts]}, {at most SHRUNK_LAYERS layers: [the lever scripts' line counts]})."""
    from zero3py.runners.case import default_settings, write_case
    rng, lever_rng = random.Random(seed), random.Random(seed + 1)  # the levers apart: the same models as before
    answers = {"crash": {"status": "crash", "ranks": [{"rank": 0, "state": "exception",
                                                       "exception_type": "builtins.KeyError", "message": "0",
                                                       "where": "stage3.py:_get_norm_groups"}]},
               "crash SIGABRT": {"status": "crash", "ranks": [{"rank": 1, "state": "signal", "signal": "SIGABRT"}]},
               "hang": {"status": "hang", "stuck": [0, 1]}}
    signatures = list(answers) + [f"silent_divergence in the {q}" for q in ("loss", "gradient norm", "final weights")]
    counts, longest, failures, exact = {}, {True: (0, ""), False: (0, "")}, [], {True: [], False: []}
    levers = {True: [], False: []}
    directory = os.path.join(work, "sweep")
    os.makedirs(directory, exist_ok=True)
    for index in range(count):
        model = random_token_model(rng) if rng.random() < 0.25 else random_feature_model(rng)
        layers, total = model["layers"], sum(1 for _ in all_specs(model["layers"]))
        settings = default_settings(model, rng.choice([1, 2, 4]), rng.choice([1, 2, 3]), rng.randint(0, 10 ** 9),
                                    rng.choice([1, 2, 3]), rng.choice([1, 2, 4]))
        settings["gradient_clipping"] = rng.choice([0.0, 1.0])
        settings["torch"] = {"raw_access": rng.choice(["cached_reference", "own_forward", "parent_attribute",
                                                       "external_parameter"]), "raw_gradient": rng.random() < 0.3}
        if any(layer["type"] == "moe" for layer in all_specs(layers)):
            settings["zero"]["leaf_modules"] = ["moe"]
        for leaf in ("causal_self_attention", "swiglu"):
            if any(layer["type"] == leaf for layer in all_specs(layers)) and rng.random() < 0.3:
                settings["zero"]["leaf_modules"].append(leaf)
        if settings["world"] == 4 and rng.random() < 0.5:
            settings["zero"]["shard_group_size"] = 2
        with open(os.path.join(directory, "case.json"), "w") as out:
            json.dump(settings, out)
        tensors = None
        if index % EXACT_SWEEP_EVERY == 0:
            try:  # the case's weights and data: its seeded script's
                draft = load_script(cases.script(directory, "torch", {"status": "ok"},
                                                 "silent_divergence in the loss", "draft.py")["path"])
                tensors = case_tensors(draft.model, draft.DATA)
                write_case(directory, settings, *tensors)
            except Exception as error:  # noqa: BLE001  a generator bug: reported with its case
                failures.append(f"sweep: the case's weights and data: {type(error).__name__}: {error}: "
                                f"{json.dumps(settings)[:1500]}")
                tensors = None
        bits_checked, plain_lines = False, {}
        for target in ("deepspeed", "fsdp2", "torch"):
            for signature in signatures:
                result = swept_script(cases, directory, target, answers.get(signature, {"status": "ok"}), signature,
                                      settings, failures)
                if result is None:
                    continue
                plain_lines[target, signature] = result["lines"]
                shrunk = total <= SHRUNK_LAYERS
                counts.setdefault((shrunk, target, signature.replace("silent_divergence in the ", "")), []).append(
                    result["lines"])
                if tensors is not None:
                    failures += exact_form(cases, directory, target, answers.get(signature, {"status": "ok"}),
                                           signature, tensors, exact[shrunk], check_bits=not bits_checked)
                    bits_checked = True
                if result["lines"] > longest[shrunk][0]:
                    longest[shrunk] = (result["lines"], f"{target}, {signature}, {total} layers, "
                                                        f"{settings['torch']['raw_access']}: {json.dumps(layers)}")
        # The same case again with random levers: each script compiles within 120 characters and costs
        # at most LEVER_LINES more than the case's own without them.
        random_levers(lever_rng, settings)
        with open(os.path.join(directory, "case.json"), "w") as out:
            json.dump(settings, out)
        for (target, signature), lines in plain_lines.items():
            result = swept_script(cases, directory, target, answers.get(signature, {"status": "ok"}), signature,
                                  settings, failures)
            if result is None:
                continue
            levers[total <= SHRUNK_LAYERS].append(result["lines"])
            if result["lines"] > lines + LEVER_LINES:
                failures.append(f"sweep: {target} {signature}: the levers take {result['lines'] - lines} lines "
                                f"(at most {LEVER_LINES}): {json.dumps(settings)[:1500]}")
    return counts, longest, failures, exact, levers


def swept_script(cases, directory, target, answer, signature, settings, failures):
    """A swept case's script, written, compiled, its lines within 120 characters (failures
    otherwise); None where the target cannot write it (Unsupported) or the writer failed."""
    from zero3py.runners.training import Unsupported
    try:
        result = cases.script(directory, target, answer, signature, "sweep.py")
    except Unsupported:
        return None
    except Exception as error:  # noqa: BLE001  a generator bug: reported with its case
        failures.append(f"sweep: {target} {signature}: {type(error).__name__}: {error}: {json.dumps(settings)[:1500]}")
        return None
    text = open(result["path"]).read()
    try:
        compile(text, result["path"], "exec")
    except SyntaxError as error:
        failures.append(f"sweep: {target} {signature}: {error}:\n{text}")
    long_lines = [line for line in text.splitlines() if len(line) > 120 and not line.startswith("Run: ")]
    if long_lines:
        failures.append(f"sweep: {target} {signature}: lines over 120 characters: {long_lines[:2]}")
    return result


def random_feature_model(rng):
    """A feature model of 1-8 layers (nested ones counted) on 1-4 inputs, mse or cross-entropy."""
    width = rng.choice([1, 2, 3, 4])
    while True:
        layers, out = random_layers(rng, width, "layers", {}, [rng.randint(1, 8)])
        if out >= 1 and 1 <= sum(1 for _ in all_specs(layers)) <= 8:
            return spec(width, rng.choice(["mse", "cross_entropy"]), layers)


def random_token_model(rng):
    """A token model of 2-8 layers: the embedding, random layers on its rows, and a head giving one
    logit per vocab entry: tied to the embedding where the rows keep its width, else a linear."""
    vocab, dim = rng.choice([3, 5, 7]), rng.choice([1, 2, 3, 4])
    embedding = {"type": "embedding", "dim": dim, **({"requires_grad": False} if rng.random() < 0.15 else {})}
    named = {"layers.0.weight": [vocab, dim]}
    while True:
        body, out = random_layers(rng, dim, "layers", dict(named), [rng.randint(0, 6)], first=1) if rng.random() < 0.9 \
            else ([], dim)
        tied = out == dim and rng.random() < 0.6
        head = {"type": "tied_linear", "tie_to": "layers.0"} if tied else L(vocab, bias=rng.random() < 0.7)
        layers = [embedding] + body + [head]
        if out >= 1 and sum(1 for _ in all_specs(layers)) <= 8:
            return token_spec(vocab, rng.choice([1, 2, 3]), layers)


def exact_form(cases, directory, target, answer, signature, tensors, counts, check_bits):
    """The exact-data form of one swept script: it compiles, its lines within 120 characters, and
    (check_bits) its `model` and DATA are the case's tensors bit for bit. -> failures."""
    from zero3py.runners.training import Unsupported
    try:
        result = cases.script(directory, target, answer, signature, "sweep_exact.py", exact=True)
    except Unsupported:
        return []
    except Exception as error:  # noqa: BLE001  a generator bug
        return [f"sweep, exact data: {target} {signature}: {type(error).__name__}: {error}"]
    text, failures = open(result["path"]).read(), []
    try:
        compile(text, result["path"], "exec")
    except SyntaxError as error:
        return [f"sweep, exact data: {target} {signature}: {error}:\n{text}"]
    long_lines = [line for line in text.splitlines() if len(line) > 120 and not line.startswith("Run: ")]
    if long_lines:
        failures.append(f"sweep, exact data: {target} {signature}: lines over 120 characters: {long_lines[:2]}")
    counts.append(result["lines"])
    if check_bits:
        off = same_bits(load_script(result["path"]), *tensors)
        if off:
            failures.append(f"sweep, exact data: {target} {signature}: the script's weights or data differ from the "
                            f"case's: {off}\n{text}")
    return failures


def shrunk_findings():
    """The shrunk cases of the finding tables in traces/findings/HISTORY.md (DeepSpeed 0.19.8 and FSDP2, torch 2.15.0), as
    (target, signature, input width, layers, W, leaf modules, raw access)."""
    def scale(*shape):
        return {"type": "scale", "shape": list(shape)}

    def raw(param):
        return {"type": "raw_scale", "param": param}

    def sum_residual(*layers):
        return {"type": "sum_residual", "layers": list(layers)}

    def moe(experts, hidden=4):
        return {"type": "moe", "experts": experts, "hidden": hidden}

    def repeat(*layers):
        return {"type": "repeat", "times": 2, "layers": list(layers)}
    unused, cached, crash = {"type": "unused_linear", "out": 1}, "cached_reference", "crash"
    return [
        ("deepspeed", crash, 0, [scale(0, 1), L(2)], 1, [], cached),
        ("deepspeed", "silent_divergence in the loss", 3, [sum_residual(scale(3, 1), raw("layers.0.layers.0.scale"))],
         1, [], cached),
        ("deepspeed", crash, 0, [L(2)], 2, [], cached),
        ("deepspeed", crash, 1, [unused], 2, [], cached),
        ("deepspeed", crash, 1, [moe(1)], 1, ["moe"], cached),
        ("deepspeed", crash, 1, [L(13), sum_residual(unused, {"type": "bias", "shape": [13]}),
                                 raw("layers.1.layers.1.bias")], 2, [], cached),
        ("deepspeed", crash, 1, [sum_residual(scale(0, 1))], 2, [], cached),
        ("deepspeed", crash, 1, [moe(2), repeat(raw("layers.0.gate.weight"), L(1))], 1, ["moe"], cached),
        ("deepspeed", "silent_divergence in the gradient norm", 2,
         [sum_residual(repeat(L(1), {"type": "relu"}, L(2)), {"type": "raw_scale", "shape": [2, 1]})], 2, [], cached),
        ("deepspeed", crash, 7, [moe(3), L(1), {"type": "tied_linear", "tie_to": "layers.0.experts.0.fc",
                                                "transpose": True}], 2, ["moe"], cached),
        ("deepspeed", crash, 3, [scale(3, 1), raw("layers.0.scale")], 1, [], cached),
        ("deepspeed", crash, 1, [repeat(moe(1), moe(1)), {"type": "gelu"}], 2, ["moe"], cached),
        ("deepspeed", crash, 2, [{"type": "raw_scale", "shape": [2]}, repeat(moe(1))], 2, ["moe"], cached),
        ("fsdp2", "silent_divergence in the loss", 1, [sum_residual(scale(1, 1), raw("layers.0.layers.0.scale"))], 2,
         [], cached),
        ("fsdp2", "silent_divergence in the gradient norm", 11, [moe(2, 2)], 2, ["moe"], cached),
        ("fsdp2", "silent_divergence in the final weights", 8,
         [sum_residual(moe(3), raw("layers.0.layers.0.experts.0.fc.bias"))], 2, ["moe"], cached),
        ("fsdp2", crash, 0, [L(2)], 2, [], cached),
        ("fsdp2", crash, 0, [L(2, requires_grad=False), {"type": "raw_scale", "shape": [2]}], 2, [], cached),
        ("fsdp2", crash, 1, [sum_residual(scale(0, 1), L(1)), {"type": "tied_linear", "tie_to": "layers.0.layers.1",
                                                                 "transpose": True}, L(2)], 1, [], cached),
        ("fsdp2", crash, 2, [scale(2, 1), raw("layers.0.scale")], 2, [], "own_forward"),
        ("fsdp2", "crash SIGABRT", 3, [moe(2)], 2, ["moe"], cached),
        ("fsdp2", "hang", 3, [moe(2)], 2, ["moe"], cached)]


def shrunk_lines(cases, work):
    """The line counts of those shrunk findings' scripts (written, not run): (lines, target,
    signature) of each finding as found, and the worst of its model under every other target and
    verdict kind (those a target can write: DeepSpeed refuses HSDP and a missing moe leaf)."""
    from zero3py.runners.case import default_settings
    from zero3py.runners.training import Unsupported
    answers = {"crash": {"status": "crash", "ranks": [{"rank": 0, "state": "exception",
                                                       "exception_type": "builtins.RuntimeError",
                                                       "message": "The size of tensor a (0) must match the size of "
                                                                  "tensor b (2)", "where": "x.py:f"}]},
               "crash SIGABRT": {"status": "crash", "ranks": [{"rank": 1, "state": "signal", "signal": "SIGABRT"}]},
               "hang": {"status": "hang", "stuck": [0, 1]}}
    directory, counts = os.path.join(work, "shrunk"), []
    os.makedirs(directory, exist_ok=True)
    for target, signature, width, layers, world, leaves, access in shrunk_findings():
        settings = default_settings(spec(width, "mse", layers), world, 2, 5, 2, 2)
        settings["zero"]["leaf_modules"], settings["torch"]["raw_access"] = leaves, access
        with open(os.path.join(directory, "case.json"), "w") as out:
            json.dump(settings, out)
        written = cases.script(directory, target, answers.get(signature, {"status": "ok"}), signature, "shrunk.py")
        counts.append((written["lines"], target, signature))
        others = []
        for other in ("deepspeed", "fsdp2", "torch"):
            for kind in list(answers) + [f"silent_divergence in the {q}" for q in ("loss", "gradient norm",
                                                                                   "final weights")]:
                try:
                    lines = cases.script(directory, other, answers.get(kind, {"status": "ok"}), kind,
                                         "other.py")["lines"]
                except Unsupported:
                    continue
                others.append((lines, other, kind))
        counts.append(max(others))
    return counts


def all_specs(layers):
    for layer in layers:
        yield layer
        yield from all_specs(layer.get("layers", []))


def line_summary(counts, shrunk):
    """`n/m <= LINE_CAP, max k` per target and kind of script, of the cases of at most
    SHRUNK_LAYERS layers (`shrunk`) or of the larger ones."""
    chosen = {(target, kind): values for (small, target, kind), values in counts.items() if small == shrunk}
    every = sorted(n for values in chosen.values() for n in values)
    parts = [f"{target} {kind}: {sum(n <= LINE_CAP for n in values)}/{len(values)} within {LINE_CAP}, "
             f"median {sorted(values)[len(values) // 2]}, max {max(values)}" for (target, kind), values in
             sorted(chosen.items())]
    return f"{sum(n <= LINE_CAP for n in every)}/{len(every)} within {LINE_CAP}, max {every[-1] if every else 0}", parts


# -- main -----------------------------------------------------------------------------------------
def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--python", help="the venv's python (default: tools/lib/diff_venv.sh's)")
    parser.add_argument("--only", help="run only the checks whose name holds one of these (comma-separated)")
    parser.add_argument("--keep", help="write the cases and scripts here and keep them")
    args = parser.parse_args()
    reexec_in_venv(args)
    args.python = os.path.abspath(args.python or sys.executable)
    sys.path.insert(0, TOOLS)
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    from runner_test import Runner
    failures, report, counts = [], [], []
    started = time.monotonic()
    work = args.keep or tempfile.mkdtemp(prefix="zero3-repro-test-")
    os.makedirs(work, exist_ok=True)
    wanted = lambda name: not args.only or any(part in name for part in args.only.split(","))  # noqa: E731
    cases = Cases(work, args.python, {"sweep": "torch 2.15.0+cu132, deepspeed 0.19.8, python 3.11.2"})
    runners = {}

    def runner(target):  # one live runner per target; its hello's versions head that target's scripts
        if target not in runners:
            runners[target] = Runner(args.python, target)
            found = runners[target].hello["versions"]
            cases.versions[target] = ", ".join(f"{k} {found[k]}" for k in ("torch", "deepspeed", "python")
                                               if k in found)
        return runners[target]

    try:
        if wanted("sweep"):
            swept, longest, more, exact, levers = sweep_lines(cases, work)
            failures += more
            for shrunk in (True, False):
                total, parts = line_summary(swept, shrunk)
                what = (f"at most {SHRUNK_LAYERS} layers" if shrunk
                        else f"more than {SHRUNK_LAYERS} layers (information)")
                print(f"  line sweep, generated cases of {what}: {total}; the longest: {longest[shrunk][1][:300]}",
                      flush=True)
                for part in parts:
                    print(f"    {part}", flush=True)
            for shrunk in (True, False):
                values = sorted(exact[shrunk])
                print(f"  the same cases' scripts with their exact weights and data as literals (information: none is "
                      f"kept over {LINE_CAP}), {'at most' if shrunk else 'more than'} {SHRUNK_LAYERS} layers: "
                      f"{sum(n <= LINE_CAP for n in values)}/{len(values)} within {LINE_CAP}, median "
                      f"{values[len(values) // 2] if values else 0}, max {values[-1] if values else 0}", flush=True)
            for shrunk in (True, False):
                values = sorted(levers[shrunk]) or [0]
                print(f"  the same cases' scripts with random ZeRO levers and activation checkpointing (each at "
                      f"most {LEVER_LINES} lines over its own without), {'at most' if shrunk else 'more than'} "
                      f"{SHRUNK_LAYERS} layers: {sum(n <= LINE_CAP for n in values)}/{len(values)} within "
                      f"{LINE_CAP}, median {values[len(values) // 2]}, max {values[-1]}", flush=True)
            if longest[True][0] > LINE_CAP:
                failures.append(f"sweep: a script of {longest[True][0]} lines for a case of at most {SHRUNK_LAYERS} "
                                f"layers (the cap is {LINE_CAP}): {longest[True][1]}")
            shrunk = shrunk_lines(cases, work)
            found, every = shrunk[0::2], shrunk[1::2]
            print(f"  HISTORY.md's {len(found)} shrunk findings: {sum(n <= LINE_CAP for n, _, _ in found)} within "
                  f"{LINE_CAP} lines, the longest {max(found)}; " + ", ".join(f"{n}" for n, _, _ in found), flush=True)
            print(f"    their models under every target and kind: the longest of each " + ", ".join(
                f"{n}" for n, _, _ in every) + f"; overall {max(every)}", flush=True)
            for lines, target, signature in shrunk:
                if lines > LINE_CAP:
                    failures.append(f"HISTORY.md's shrunk finding ({target}, {signature}): {lines} lines (the cap is "
                                    f"{LINE_CAP})")
        check_cases(cases, runner, wanted, failures, report, counts, work, args.python)
    finally:
        for live in runners.values():
            live.close()
    if counts:
        print(f"  the scripts run here: {sum(n <= LINE_CAP for n in counts)}/{len(counts)} within "
              f"{LINE_CAP} lines, the longest {max(counts)}")
    for failure in failures:
        print("FAIL", failure)
    print(f"repro test: {'FAILED' if failures else 'passed'}: {len(failures)} failures in "
          f"{time.monotonic() - started:.0f} s" + (f"; cases and scripts kept in {work}" if args.keep else ""))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


def check_cases(cases, runner, wanted, failures, report, counts, work, python):
    from zero3py.runners.repro import verify_repro, write_repro
    from zero3py.runners.training import Unsupported
    # Healthy cases of every layer type under every target: exit 0, the reference as the runner's.
    healthy = []
    for name, target, model, changes, signature in healthy_cases():
        if wanted(name):
            runner(target)  # the hello's versions go into the scripts' headers
            directory = cases.write(name, target, settings_of(model, changes), route=changes.get("route"))
            healthy.append((name, target, directory, signature))
    check_healthy(cases, healthy, {t: runner(t) for t in {c[1] for c in healthy}}, failures, report, counts)
    # The saved DeepSpeed findings (traces/findings/): each script verified, its signature printed.
    outputs = {"deepspeed-norm-groups-keyerror": ("reproduced: KeyError raised in _get_norm_groups (stage3.py)",),
               "deepspeed-not-available": ("reproduced: AssertionError: NOT_AVAILABLE",),
               "deepspeed-empty-cat": ("reproduced: ValueError: expected a non-empty list of Tensors",),
               "deepspeed-cached-reference-divergence": ("reproduced: the gradient norm is off",)}
    for path in sorted(os.listdir(FINDINGS)):
        name = path[:-len(".json")]
        if not path.endswith(".json") or not wanted(name):
            continue
        with open(os.path.join(FINDINGS, path)) as file:
            saved = json.load(file)
        if not isinstance(saved, dict) or "case" not in saved or not name.startswith("deepspeed-"):
            continue  # not a saved DeepSpeed finding (an index of upstream reports, say)
        runner("deepspeed")
        directory = cases.write(name, "deepspeed", saved["case"])
        answer = runner("deepspeed").ask(directory)
        result = verify_finding(name, "deepspeed", directory, answer, cases, failures, report, counts,
                                expect_in=saved["signature"].split(":")[0], output_has=outputs.get(name, ()))
        if name == "deepspeed-norm-groups-keyerror" and result:
            # `KeyError: 0`: the type and the function that raised it, never the digit.
            text = open(result[0]["path"]).read() if os.path.exists(result[0]["path"]) else ""
            if "_get_norm_groups" not in result[0]["expect"] or re.search(r"""r["']\\b0\\b""", text) or \
                    'in _get_norm_groups(?!\\w)' not in text:
                failures.append(f"KeyError: 0 must be matched on its type and raising function: {result[0]}\n{text}")
    # FSDP2's: an MoE leaf whose ranks route to different experts (each rank one expert: silent;
    # one rank both, the other one: gloo aborts), and a zero-sized weight's empty reduce-scatter.
    moe = spec(11, "mse", [{"type": "moe", "experts": 2, "hidden": 2}])
    for name, micro, route, expect_in in (("fsdp2-moe-disjoint-routes", 1, "disjoint", "silent_divergence"),
                                          ("fsdp2-moe-split-routes", 2, "split", None)):
        if wanted(name):
            runner("fsdp2")
            settings = settings_of(moe, {"leaf_modules": ["moe"], "micro_batch": micro, "steps": 1})
            directory = cases.write(name, "fsdp2", settings, route=route)
            verify_finding(name, "fsdp2", directory, runner("fsdp2").ask(directory), cases, failures, report, counts,
                           expect_in=expect_in)
    if wanted("fsdp2-zero-sized"):
        runner("fsdp2")
        directory = cases.write("fsdp2-zero-sized", "fsdp2", settings_of(spec(0, "mse", [L(2)]), {}))
        verify_finding("fsdp2-zero-sized", "fsdp2", directory, runner("fsdp2").ask(directory), cases, failures,
                       report, counts, expect_in="_chunk_cat expects non-empty tensor",
                       output_has=("reproduced: RuntimeError: _chunk_cat expects non-empty tensor",))
    if wanted("fsdp2-moe-exact-data"):
        check_exact_data(cases, runner("fsdp2"), failures, report, counts, work)
    # A script that does not reproduce its answer is not kept, and says why.
    if wanted("not-reproduced"):
        directory = cases.write("not-reproduced", "torch", settings_of(HSDP, {}))
        invented = {"status": "crash", "ranks": [{"rank": 0, "state": "exception",
                                                  "exception_type": "builtins.RuntimeError",
                                                  "message": "INVENTED_FAILURE in the step", "where": "x.py:f"}]}
        written = cases.script(directory, "torch", invented, "crash builtins.RuntimeError: INVENTED_FAILURE at x.py:f")
        check = verify_repro(written["path"])
        print(f"  not-reproduced: verified {check['verified']}, exit {check['exit_code']}, kept "
              f"{os.path.exists(written['path'])}, why: {check['why'][:150]!r}", flush=True)
        if check["verified"] or os.path.exists(written["path"]) or check["exit_code"] != 0 or not check["why"]:
            failures.append(f"a script that does not reproduce must be removed with a reason: {check}")
    # A bf16 case gets no script under any target (repro.check_supported says why), and none is left behind.
    if wanted("bf16-scripts"):
        directory = cases.write("bf16-scripts", "torch", settings_of(HSDP, {}))
        with open(os.path.join(directory, "case.json")) as file:
            settings = json.load(file)
        with open(os.path.join(directory, "case.json"), "w") as out:
            json.dump({**settings, "dtype": "bf16"}, out, indent=1)
        for target in ("torch", "deepspeed", "fsdp2"):
            path = os.path.join(directory, f"never-{target}.py")
            try:
                write_repro(directory, {"status": "ok"}, path, "", target, "silent_divergence in the loss", python)
                failures.append(f"bf16 {target}: a script was written")
            except Unsupported as error:
                if "bf16" not in str(error) or os.path.exists(path):
                    failures.append(f"bf16 {target}: unsupported must name bf16 and leave no script: {error}")
                print(f"  bf16 {target}: unsupported: {str(error)[:110]}", flush=True)
    # No script for the harness's own disagreements, nor for an answer that is no finding.
    if wanted("unsupported"):
        directory = cases.write("unsupported", "torch", settings_of(HSDP, {}))
        for signature in ("reference_disagreement in the loss", "reference_error builtins.RuntimeError: boom",
                          "memory_growth in the held bytes"):
            try:
                write_repro(directory, {"status": "ok"}, os.path.join(directory, "never.py"), "", "deepspeed",
                            signature, python)
                failures.append(f"{signature}: a script was written")
            except Unsupported as error:
                print(f"  {signature[:40]}: unsupported: {str(error)[:110]}", flush=True)
        for answer, signature in (({"status": "unsupported"}, ""), ({"status": "ok"}, "agree")):
            try:
                write_repro(directory, answer, os.path.join(directory, "never.py"), "", "torch", signature, python)
                failures.append(f"{answer}, {signature!r}: no finding, yet a script was written")
            except ValueError:
                pass


if __name__ == "__main__":
    sys.exit(main())
