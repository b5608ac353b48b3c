"""A finding as a short standalone PyTorch script for an upstream report, and its verification.

    written = write_repro(case_directory, answer, "repro.py", versions, target, signature, python)
    check = verify_repro(written["path"])   # runs its Run: line; removes the script unless it reproduces
    # the runner's way: both, seeded first, then (when that does not reproduce) the case's exact numbers
    found = reproduce(case_directory, answer, "repro.py", versions, target, signature, python)

The script (no zero3 import, no case files) holds the case's model written out as nn.Module
classes (repro_model.py: the runner's module tree, torch_layers' math), data and weights drawn
from the case's seed at import (a module-level `model` and DATA: every spawned rank builds the
same, and the parent's trains the reference), the framework's settings as a dict, and W
processes over gloo on CPU (torch.multiprocessing spawn; their process group meets in a file
store in a fresh folder, so no port is chosen) training it as the runner's target does
(targets.py): DeepSpeed ZeRO, FSDP2's fully_shard, or DDP, the control, with the case's ZeRO
stage, offloading, hpZ and activation checkpointing (repro_levers.py). A shrunk case's
script (up to 4 layers, nested ones counted) fits in 60 lines of at most WIDTH characters: the
model first, one-line constructors where they fit, FSDP2's and DDP's ranks and the reference
sharing one loop (steps()), DeepSpeed's reference the same plain loop inline in the main block.
A finding that needs the case's very numbers (an MoE whose ranks route to different experts
only with zero3's weights and data, a value at a threshold) does not reproduce with seed-drawn
ones: reproduce() then writes the script again with the case directory's initial weights and
data as literals (write_repro(exact=True): BATCHES and INIT, each float32 as the shortest
literal that reads back as the same float32, so the tensors are bit for bit the runner's) and
keeps it when it reproduces and fits in LINE_CAP lines; else the why names both tries.
It checks one signature and exits 1 when it reproduces, 0 when it does not, 2 when it fails
another way; it prints what it saw against what it expects, and last `reproduced: <what
matched>` or `not reproduced: <why>`:

  * a crash: the first rank to fail fails as one of the answer's failed ranks did (ranks race:
    the one gloo aborts in one run raises after its peer in another): a rank killed by that
    signal, exiting with that code, or raising that exception type with a specific part of it,
    matched whole: an upper-case identifier of the message (NOT_AVAILABLE), else its longest run
    of words (two at least; its first words past FRAGMENT_CHARS), else the framework function
    that raised it (`KeyError: 0`: `KeyError` raised in stage3.py's _get_norm_groups, never `0`);
  * a hang: no rank raised and some rank did not finish within HANG_TIMEOUT_S (a rank that
    finished stays alive and idle, as the runner's ranks do); each stuck rank prints where it
    waits (faulthandler, on SIGUSR1) before the script ends and its ranks (daemons) with it;
  * a silent divergence: the quantity the harness named (`silent_divergence in the loss`, `...
    in the gradient norm`, `... in the final weights`, props/target/target_verdict.cc) beyond TOLERANCE
    against an unsharded plain-torch reference of the same model, run by the same loop as the
    runner's reference (training.reference_run and train_steps: the global batch, loss / GAS, a
    zero gradient for a trainable parameter nothing reached, the norm before clipping, clipping
    by max / (norm + 1e-6)). DeepSpeed's ranks run their own loop (engine.backward, engine.step).
    The loss is compared per micro-step (the ranks' mean against the reference's global batch),
    the norm per step, the final weights as the harness does (each tensor's shape, then its
    distance from the reference's over its update, on the elements a gradient above 1e-5 moved:
    a shape off, FSDP2's [0, 0] for a [5, 0] weight, is a divergence).

A `reference_disagreement` or `reference_error` verdict has no script: it is zero3's reference
against the runner's own, no bug of the framework (write_repro raises Unsupported).
"""
import json
import os
import re
import shlex
import signal
import subprocess
import time

from zero3py.runners.case import Case
from zero3py.runners.repro_levers import FRAMEWORK, SCRIPT_CLASSES, Levers
from zero3py.runners.repro_model import ScriptModel
from zero3py.runners.repro_text import WIDTH, Call, assignments, fill_literal, layout, literal, number
from zero3py.runners.targets import LAYER_CLASSES
from zero3py.runners.training import Unsupported

# The script's class of each layer type a leaf_modules entry may name (targets.LAYER_CLASSES' keys).
LEAF_CLASSES = {kind: SCRIPT_CLASSES[kind] for kind in LAYER_CLASSES}
# Beyond these the script calls the framework off its reference (relative per step, a norm also
# 1e-5 absolute; weights: of their update): the harness's (compare.py) for norms and weights, ten
# times it for the loss (the script does not measure the case's rounding spread, which the
# harness widens its own by), and far below the findings' (percents and more).
TOLERANCE = {"loss": 1e-4, "gradient norm": 1e-3, "final weights": 1e-3}
HANG_TIMEOUT_S = 120
LINE_CAP = 60  # an issue's bound on a shrunk case's script: an exact-data script over it is not kept
EXACT_GRACE_S = 90  # both verification runs of reproduce() together: at most their limit and this
MIN_VERIFY_S = 30  # the least time worth a second run
RANK_ROWS = ("x.chunk(W)[rank]", "y.chunk(W)[rank]")  # a rank's B rows of a global batch
VERIFY_TIMEOUT_S = 300
IDENTIFIER = re.compile(r"\b[A-Z][A-Z_]{7,}\b")
WORD = r"[A-Za-z_](?:[A-Za-z_-]*[A-Za-z_])?"
WORDS = re.compile(rf"(?<![\w.-]){WORD}(?: {WORD})+(?![\w-])")
FRAGMENT_CHARS = 48  # a longer run of words is cut to its first words (two at least)


# -- what the script expects ----------------------------------------------------------------------
def message_fragment(message):
    """(fragment, kind) of an exception message: its first upper-case identifier, else its longest
    run of two or more words (letters, `_`, inner `-`); (None, None) when it has neither."""
    found = IDENTIFIER.search(message)
    if found:
        return found.group(), "identifier"
    runs = WORDS.findall(message)
    if not runs:
        return None, None
    words = max(runs, key=len).split(" ")
    while len(words) > 2 and len(" ".join(words)) > FRAGMENT_CHARS:  # its first words: specific enough
        words.pop()
    return " ".join(words), "words"


def rank_failure(rank):
    """What one failed rank of an answer shows: an exception (its type and a specific part of
    it), a signal, an exit code; None for a rank that finished or was stuck."""
    state = rank.get("state")
    if state == "exception":
        qualified = rank.get("exception_type") or "Exception"
        fragment, kind = message_fragment(rank.get("message", ""))
        where = rank.get("where") or ""
        if not fragment and ":" in where:
            fragment, kind = where, "where"
        return {"kind": "exception", "type": qualified.rsplit(".", 1)[-1], "qualified": qualified,
                "fragment": fragment, "fragment_kind": kind, "where": where}
    if state == "signal":
        return {"kind": "signal", "signal": rank.get("signal", "SIGABRT")}
    if state == "exit":
        return {"kind": "exit", "code": rank.get("exit_code")}
    return None


def expectation(answer, signature):
    """What the script must see for the finding `answer` judged as `signature`. A crash: the
    failures of the answer's ranks, the first in rank order first (the harness's signature takes
    it); the script reproduces it when the first rank to fail in its own run fails as one of them
    (ranks race: the one that dies of SIGABRT in one run raises after its peer in another)."""
    signature = signature or ""
    if signature.startswith(("reference_disagreement", "reference_error")):
        raise Unsupported(f"{signature}: zero3's reference disagrees with the runner's own unsharded reference; "
                          f"no framework ran wrong, so there is nothing to report upstream")
    status = answer.get("status")
    if status == "crash":
        failures = []
        for rank in answer.get("ranks", []):
            failure = rank_failure(rank)
            if failure and failure not in failures:
                failures.append(failure)
        # A rank killed by a signal (gloo's abort) first: its peers' exceptions follow from it.
        failures.sort(key=lambda failure: failure["kind"] == "exception")
        if not failures:
            raise ValueError("a crash answer without a rank that raised, died or exited")
        return {"kind": "crash", "failures": failures}
    if status == "hang":  # the runner's stuck ranks say where they waited (`waits_in`)
        waits = [f"rank {r.get('rank')} in {r['waits_in']}" for r in answer.get("ranks", []) if r.get("waits_in")]
        return {"kind": "hang", "stuck": answer.get("stuck", []), "waits": waits[:2]}
    if status == "ok":
        found = re.fullmatch(r"silent_divergence in the (loss|gradient norm|final weights)", signature)
        if found:
            return {"kind": "divergence", "quantity": found.group(1)}
        if signature.startswith("silent_divergence"):
            raise Unsupported(f"{signature}: a script checks the loss, the gradient norm or the final weights")
        if signature.startswith("memory_growth"):
            raise Unsupported(f"{signature}: a script would need the runner's tensor-byte meter (memory.py) to show it; "
                              "the case directory replays it with `zero3 fuzz --target T --replay`")
        raise ValueError(f"an ok answer judged {signature!r} is no finding")
    raise ValueError(f"an answer of status {status!r} is no finding to reproduce")


def describe_failure(failure):
    kind = failure["kind"]
    if kind == "signal":
        return f"a rank killed by {failure['signal']}"
    if kind == "exit":
        return f"a rank exiting with code {failure['code']}"
    if failure["fragment_kind"] == "where":
        file, _, function = failure["fragment"].partition(":")
        return f"{failure['type']} raised in {function} ({file})"
    return f"{failure['type']}: {failure['fragment']}" if failure["fragment"] else failure["type"]


def describe(expect):
    """A short text of the expectation (write_repro's `expect`, the script's title)."""
    kind = expect["kind"]
    if kind == "crash":
        return " or ".join(describe_failure(f) for f in expect["failures"])
    if kind == "hang":
        seen = f" (the harness saw {', '.join(expect['waits'])})" if expect.get("waits") else ""
        return f"a hang: no rank raises, some rank does not finish within {HANG_TIMEOUT_S} s{seen}"
    return f"the {expect['quantity']} off an unsharded reference by more than {TOLERANCE[expect['quantity']]:g}"


def title(expect, framework):
    if expect["kind"] == "crash":
        first = expect["failures"][0]
        return f"{framework} {'raises' if first['kind'] == 'exception' else 'fails:'} {describe_failure(first)}"
    if expect["kind"] == "hang":
        return f"{framework} hangs: no rank raises, and some rank never finishes"
    verb = "differ" if expect["quantity"] == "final weights" else "differs"
    return f"{framework} trains without an error, but its {expect['quantity']} {verb} from plain PyTorch's"


def patterns(failure):
    """(regexes the failure text must all match (re.M), what they show) of one failure."""
    kind = failure["kind"]
    if kind == "signal":
        return [rf"\bsignal {failure['signal']}\b"], failure["signal"]
    if kind == "exit":
        return [rf"\bexit code {failure['code']}\b"], f"exit code {failure['code']}"
    found = [rf"^(\w+\.)*{re.escape(failure['type'])}\b"]
    fragment, fragment_kind = failure["fragment"], failure["fragment_kind"]
    if fragment_kind == "where":
        file, _, function = fragment.partition(":")
        return found + [rf'{re.escape(file)}", line \d+, in {re.escape(function)}(?!\w)'], \
            f"{failure['type']} raised in {function} ({file})"
    if fragment:
        return found + [rf"\b{re.escape(fragment)}\b".replace("\\ ", " ")], f"{failure['type']}: {fragment}"
    return found, failure["type"]


# -- the script ---------------------------------------------------------------------------------
def check_supported(case, target):
    if case["dtype"] != "f32":
        raise Unsupported(f"dtype {case['dtype']}: no script for a bf16 case: its plain-PyTorch reference would need "
                          f"zero3's mixed precision (f32 masters, a bf16 compute copy, gradients widened to f32), "
                          f"DeepSpeed's masters set and read, and the inputs of nn.Linear cast, some 5 lines more "
                          f"than the 60-line cap leaves a shrunk case's script")
    if not case["optimizer"].get("bias_correction", True):
        raise Unsupported("bias_correction false: torch.optim.AdamW always corrects")
    group = case["zero"].get("shard_group_size", 0)
    if target == "deepspeed" and 0 < group < case["world"]:
        raise Unsupported("DeepSpeed runs without shard groups here (0.19.8 removed MiCS)")


def deepspeed_settings(case):
    """targets.deepspeed_config(case), less what does not change the run: the keys at the installed
    DeepSpeed's defaults (read from DeepSpeed itself), its print interval, the batch size it
    derives, and two flags it never reads with this optimizer and no offload: the same run, in
    fewer lines."""
    from zero3py.runners.targets import deepspeed_config
    config = deepspeed_config(Case(None, case, None, None))
    try:
        from deepspeed.runtime import constants
        from deepspeed.runtime.zero.config import DeepSpeedZeroConfig
        zero_defaults = DeepSpeedZeroConfig(stage=config["zero_optimization"]["stage"])
    except Exception:  # noqa: BLE001  DeepSpeed absent or changed: write every key
        return config
    defaults = {"fp16": {"enabled": constants.FP16_ENABLED_DEFAULT},
                "bf16": {"enabled": constants.BFLOAT16_ENABLED_DEFAULT},
                "prescale_gradients": constants.PRESCALE_GRADIENTS_DEFAULT,
                "gradient_predivide_factor": constants.GRADIENT_PREDIVIDE_FACTOR_DEFAULT,
                "zero_allow_untested_optimizer": constants.ZERO_ALLOW_UNTESTED_OPTIMIZER_DEFAULT,
                "zero_force_ds_cpu_optimizer": constants.ZERO_FORCE_DS_CPU_OPTIMIZER_DEFAULT,
                "wall_clock_breakdown": constants.WALL_CLOCK_BREAKDOWN_DEFAULT,
                "gradient_clipping": constants.GRADIENT_CLIPPING_DEFAULT}
    # train_batch_size: DeepSpeed derives it from the other two and W.
    dropped = ("steps_per_print", "train_batch_size")
    kept = {k: v for k, v in config.items() if k not in dropped and (k not in defaults or defaults[k] != v)}
    if kept.get("gradient_accumulation_steps") == 1:  # DeepSpeed's default beside a micro-batch size alone
        del kept["gradient_accumulation_steps"]
    # Two flags the runner sets that DeepSpeed never reads here: it asks zero_allow_untested_optimizer
    # only of an optimizer ZeRO does not support (torch.optim.AdamW it does), zero_force_ds_cpu_optimizer
    # only under ZeRO-Offload (engine._configure_optimizer).
    try:
        import torch
        from deepspeed.runtime.zero.utils import ZERO_SUPPORTED_OPTIMIZERS
        if torch.optim.AdamW in ZERO_SUPPORTED_OPTIMIZERS:
            kept.pop("zero_allow_untested_optimizer", None)
    except Exception:  # noqa: BLE001  DeepSpeed changed: keep the flag
        pass
    if "offload_optimizer" not in config["zero_optimization"]:
        kept.pop("zero_force_ds_cpu_optimizer", None)
    fields = {(info.alias or name): name for name, info in type(zero_defaults).model_fields.items()}
    zero = {}
    for key, value in config["zero_optimization"].items():
        field = fields.get(key, key)
        if key == "stage" or not hasattr(zero_defaults, field) or getattr(zero_defaults, field) != value:
            zero[key] = value
    kept["zero_optimization"] = zero
    return kept


class Script:
    """The text of one script: the case, the target, the expectation. Top to bottom: the docstring
    (title, versions, Run: line), imports and constants, the model (its classes, then the seed,
    DATA and the module-level `model`), DeepSpeed's CONFIG, steps() where the ranks and the reference
    share the loop (FSDP2, DDP), train(rank) for each spawned rank, and the main block: spawn,
    the reference (DeepSpeed: its plain loop inline), the check."""

    def __init__(self, case, target, expect, versions, python, name, exact=None):
        self.case, self.target, self.expect, self.model = case, target, expect, ScriptModel(case, exact)
        self.levers = Levers(case, target, self.model)
        self.versions, self.python, self.name = versions, python, name
        self.kind, self.quantity = expect["kind"], expect.get("quantity")
        self.divergence = self.kind == "divergence"
        self.clip = float(case["gradient_clipping"])
        self.gas = case["gas"]
        group = case["zero"].get("shard_group_size", 0)
        self.group = group if target == "fsdp2" and 0 < group < case["world"] else 0
        self.leaves = list(case["zero"]["leaf_modules"])
        for kind in [n for n in self.leaves if n in LEAF_CLASSES]:
            if kind not in self.model.kinds | ({"mlp"} if "moe" in self.model.kinds else set()):
                if self.levers.zero3_calls:
                    raise Unsupported(f"leaf_modules names {kind}, which the model lacks: DeepSpeed's "
                                      f"set_z3_leaf_modules refuses that (a harness's case, not a framework's bug)")
                self.leaves.remove(kind)
        self.model.mlp_class = self.levers.mlp_class  # the experts get a class of their own for DeepSpeed
        # The rank's folder: the file store of its process group, and what it leaves for the parent.
        self.folder = "results" if self.divergence or self.kind == "hang" else "tmp"
        self.record = {"loss": "losses", "gradient norm": "norms"}.get(self.quantity)

    def run_line(self):
        command = f"{shlex.quote(self.python)} {shlex.quote(self.name)}"
        return f"DS_ACCELERATOR=cpu {command}" if self.target == "deepspeed" else command

    def header(self):
        case, hyper = self.case, self.case["optimizer"]
        pairs = [("W", case["world"]), ("B", case["micro_batch"]), ("GAS", case["gas"]), ("STEPS", case["steps"])]
        if self.model.uses_sequences:  # T: a sequence's tokens (rows), 1 in a feature model
            pairs.append(("T", self.model.steps))
        if not self.model.exact:  # else no seed: the weights and data are literals
            pairs.append(("SEED", case["seed"]))
        constants = assignments([(name, str(value)) for name, value in pairs])[0]
        eps = number(hyper["eps"])  # left out at AdamW's default: 1e-8
        adamw = (f"ADAMW = dict(lr={number(hyper['lr'])}, betas=({number(hyper['betas'][0])}, "
                 f"{number(hyper['betas'][1])}), {'' if float(eps) == 1e-8 else f'eps={eps}, '}"
                 f"weight_decay={number(hyper['weight_decay'])})")
        merged = constants.replace(" =", ", ADAMW =", 1) + ", " + adamw[len("ADAMW = "):]
        docstring = [f'"""{title(self.expect, self.levers.framework)}',
                     f"{self.versions}; {case['world']} process{'es' if case['world'] > 1 else ''} over gloo on CPU; "
                     "found by zero3's differential fuzz.",
                     f"Run: {self.run_line()}  # exit 1: it reproduces, 0: it does not, 2: it fails another way"
                     '"""']
        return docstring, [merged] if len(merged) <= WIDTH else [constants, adamw]

    def imports(self, body):
        std = [name for name in ("collections", "contextlib", "faulthandler", "functools", "math", "os", "re", "signal",
                                 "sys", "tempfile", "time") if re.search(rf"\b{name}\.", body)]
        names = std + (["deepspeed"] if self.target == "deepspeed" else []) + ["torch"]
        if self.target == "fsdp2":
            names.append("torch.distributed.fsdp as fsdp")
        names += ["torch.nn as nn", "torch.nn.functional as F"]
        lines, line = [], ""
        for name in names:  # `import a, b` lines of at most WIDTH characters
            if line and len(line) + 2 + len(name) > WIDTH:
                lines.append(line)
                line = ""
            line = f"{line}, {name}" if line else f"import {name}"
        return lines + [line]

    # -- the harness's training loop in plain PyTorch: the ranks' (fsdp2, torch) and the reference's
    def limit(self):
        """clip_grad_norm_'s max_norm: the case's clipping, or none (the norm only)."""
        return number(self.clip) if self.clip > 0 else "math.inf"

    def micro_body(self, pad, x, y, engine=False, call="model"):
        """One micro-step on the rows `x`, `y`: the loss, its backward (none when no trainable
        parameter reaches the loss: the harness skips it too), the loss recorded where the script
        checks losses."""
        loss = self.model.loss(self.model.forward("engine" if engine else call, x), y)
        record = self.quantity == "loss"
        if not self.model.loss_has_gradient:
            comment = "  # no backward: no trainable parameter reaches the loss"
            return [f"{pad}{f'losses.append({loss}.item())' if record else loss}{comment}"] + (
                [f"{pad}engine.step()"] if engine else [])
        if engine:  # backward and step on one line where they fit: DeepSpeed's micro-step
            step = [f"{pad}engine.backward({'loss := ' if record else ''}{loss}); engine.step()"]
            if len(step[0]) > WIDTH:
                step = [step[0][:-len("; engine.step()")], f"{pad}engine.step()"]
            return step + ([f"{pad}losses.append(loss.item())"] if record else [])
        if record:
            return [f"{pad}((loss := {loss}) / GAS).backward()", f"{pad}losses.append(loss.item())"]
        return [f"{pad}({loss} / GAS).backward()"]

    def optimizer(self, pad, call="model"):
        """`adamw, <record> = torch.optim.AdamW(params := the trainable ones, ...), []`."""
        record = f", {self.record}" if self.record else ""
        line = (f"{pad}adamw{record} = torch.optim.AdamW(params := [p for p in {call}.parameters() if "
                f"p.requires_grad], **ADAMW, foreach=False){', []' if record else ''}")
        if len(line) <= WIDTH:
            return [line]
        return [f"{pad}params{record} = [p for p in {call}.parameters() if p.requires_grad]{', []' if record else ''}",
                f"{pad}adamw = torch.optim.AdamW(params, **ADAMW, foreach=False)"]

    def plain_loop(self, pad, call, x, y, sync=None):
        """The harness's steps (training.train_steps) in plain PyTorch, `params` and `adamw` made:
        per step the micro-steps' backward of loss / GAS, a zero gradient for a trainable parameter
        nothing reached, the norm before clipping (clipping by max / (norm + 1e-6)), AdamW's step.
        `sync`: ("fsdp2", call) or ("ddp", call) of the ranks' gradient sync at the last micro-step."""
        inner = pad + "    "
        out = [f"{pad}for step in DATA:"]
        if sync and sync[0] == "fsdp2":
            out += [f"{inner}for micro, (x, y) in enumerate(step):",
                    f"{inner}    {sync[1]}(micro == GAS - 1)  # FSDP2 reduce-scatters the gradients at the last one"]
            out += self.micro_body(inner + "    ", x, y, call=call)
        elif sync:
            out += [f"{inner}for micro, (x, y) in enumerate(step):  # DDP all-reduces the gradients at the last one",
                    f"{inner}    with {sync[1]}() if micro < GAS - 1 else contextlib.nullcontext():"]
            out += self.micro_body(inner + "        ", x, y, call=call)
        else:
            body = self.micro_body(inner + "    ", x, y, call=call)
            one = f"{inner}for x, y in step: {body[0].strip()}"
            out += [one] if len(body) == 1 and len(one) <= WIDTH and "#" not in one else [
                f"{inner}for x, y in step:"] + body
        if self.model.may_lack_gradient:
            out.append(f"{inner}for p in params: p.grad = torch.zeros_like(p) if p.grad is None else p.grad  # "
                       f"none came: zero")
        clip = f"torch.nn.utils.clip_grad_norm_(params, {self.limit()}, foreach=False)"
        if self.quantity == "gradient norm":
            out.append(f"{inner}norms.append(float({clip}))  # before clipping")
        elif self.clip > 0 or self.target == "fsdp2":
            out.append(f"{inner}{clip}" + ("" if self.clip > 0 else "  # the norm only, as the harness's step"))
        return out + [f"{inner}adamw.step(); adamw.zero_grad()"]

    def sync(self):
        """steps()'s sync parameter (its default for the reference) and the ranks' argument."""
        if self.gas == 1 or self.target == "deepspeed":
            return "", "", None
        if self.target == "fsdp2":
            return ", sync=lambda last: None", ", model.set_requires_gradient_sync", ("fsdp2", "sync")
        return ", no_sync=contextlib.nullcontext", ", ddp.no_sync", ("ddp", "no_sync")

    def steps(self):
        """steps(model, rows): the loop the ranks (fsdp2, torch) and the reference share."""
        parameter, _, sync = self.sync()
        returns = {"loss": "-> the micro-steps' losses", "gradient norm": "-> the gradient norms"}.get(
            self.quantity, "-> its AdamW")
        out = [f"def steps(model, rows{parameter}):  # the harness's training on `rows` of each global batch {returns}"]
        out += self.optimizer("    ") + self.plain_loop("    ", "model", "x[rows]", "y[rows]", sync)
        return out + [f"    return {self.record or 'adamw'}"]

    # -- each rank: train(rank, folder)
    def train(self):
        what = {"deepspeed": self.levers.framework, "fsdp2": "FSDP2's fully_shard", "torch": "DDP"}[self.target]
        out = [f"def train(rank, {self.folder}):  # rank r of W: {what} on rows r*B..(r+1)*B of each global batch"]
        if self.kind == "hang":
            out.append("    faulthandler.register(signal.SIGUSR1)  # prints where this rank waits when asked")
        if self.target == "deepspeed":
            out.append("    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(W))  # DeepSpeed "
                       "reads them")
        out.append(f"    torch.distributed.init_process_group(\"gloo\", "
                   f"init_method=f\"file://{{{self.folder}}}/store\", rank=rank, world_size=W)")
        out += self.levers.checkpoint_lines() + getattr(self, "train_" + self.target)()
        if self.kind == "hang":  # as the harness's idle ranks: alive, in no collective, until killed
            return out + ["    open(f\"{results}/{rank}\", \"w\").close()  # finished: waits, in no collective, to be "
                          "killed", f"    time.sleep({HANG_TIMEOUT_S + 60})"]
        # No destroy_process_group(): measured, it did not stop gloo's occasional abort at exit (1 in 54
        # runs with it, 1 in 42 without), and its line pushed the longest shrunk scripts over the cap.
        return out

    def save(self, numbers):
        line = f"    torch.save({numbers}, f\"{{results}}/{{rank}}\")"
        return [line] if len(line) <= WIDTH else [f"    numbers = {numbers}", "    torch.save(numbers, "
                                                                                  "f\"{results}/{rank}\")"]

    def train_deepspeed(self):
        model, out = self.model, []
        zero3 = self.levers.zero3_calls  # leaves and external parameters: ZeRO-3's gathering only
        classes = [LEAF_CLASSES[n] for n in self.leaves if n in LEAF_CLASSES and zero3]
        names = [n for n in self.leaves if n not in LEAF_CLASSES and zero3]
        if classes:
            out.append(f"    deepspeed.utils.set_z3_leaf_modules(model, [{', '.join(classes)}])  # each gathered whole")
        if names:
            out.append(f"    deepspeed.utils.set_z3_leaf_modules_by_name(model, {literal(names)})  # each gathered "
                       f"whole")
        if self.case["torch"]["raw_access"] == "external_parameter" and zero3:
            for layer in model.all:
                if layer.kind == "raw_scale" and layer.owner is not None:
                    param = model.path(model.param_name(layer.owner, layer.local))
                    register = Call("deepspeed.zero.register_external_parameter", [model.path(layer.name), param])
                    call = layout(register, 4)
                    out += ["    " + call[0]] + call[1:]
        record = f", {self.record}" if self.record else ""
        out += [f"    adamw{record} = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], **ADAMW, "
                f"foreach=False){', []' if record else ''}",
                "    engine = deepspeed.initialize(model=model, optimizer=adamw, config=CONFIG)[0]"]
        if self.quantity == "gradient norm":
            out += ["    for step in DATA:  # DeepSpeed divides each loss by GAS and steps AdamW at the step's last "
                    "micro-step",
                    "        for x, y in step:"] + self.micro_body(" " * 12, *RANK_ROWS, engine=True)
            out += ["        norms.append(float(engine.get_global_grad_norm()))  # before clipping"]
        else:
            out += ["    for x, y in sum(DATA, []):  # each micro-step: DeepSpeed divides its loss by GAS, steps AdamW "
                    "at every GAS-th"] + self.micro_body(" " * 8, *RANK_ROWS, engine=True)
        if self.record:
            out += self.save(self.record)
        if self.quantity == "final weights":
            out += ["    with deepspeed.zero.GatheredParameters(model.parameters()): torch.save(model.state_dict(), "
                    "f\"{results}/{rank}\")"]
        return out

    def shard(self):
        """fully_shard on each unit as the runner does (each leaf whole, each other module owning
        parameters, the root), on HSDP's 2-D mesh when the case has shard groups, with the case's
        levers (reshard_after_forward, offload_policy: repro_levers.py)."""
        model, out, mesh = self.model, [], ""
        if self.group:
            g = self.group
            out.append(f"    mesh = torch.distributed.device_mesh.init_device_mesh(\"cpu\", (W // {g}, {g}), "
                       f"mesh_dim_names=(\"replicate\", \"shard\"))")
            mesh = ", mesh=mesh"
        call = f"fsdp.fully_shard(unit{mesh}{self.levers.shard_arguments()})"
        if len(f"    ): {call}") > WIDTH:  # the levers apart, so that every form below fits
            out.append(f"    options = dict({self.levers.shard_arguments()[2:]})")
            call = f"fsdp.fully_shard(unit{mesh}, **options)"
        units = model.units(self.leaves)
        comment = ("the runner's units: leaves whole, the root last" if model.leaf_names(self.leaves)
                   else "each module owning parameters, then the root")
        listed = ", ".join(units) + ("," if len(units) == 1 else "")
        line = f"    for unit in ({listed}): {call}"
        if len(line) <= WIDTH:
            return out + [_fit(f"{line}  # {comment}")]
        head = f"    for unit in ({listed}):"
        if len(head) <= WIDTH:  # the units on one line, the call under it
            return out + [_fit(f"{head}  # {comment}"), f"        {call}"]
        aligned = layout(Call("for unit in ", units, f": {call}"), 4)  # filled, aligned after the parenthesis
        aligned[0] = "    " + aligned[0]
        if all(len(line) <= WIDTH for line in aligned):
            return out + [_fit(f"{aligned[0]}  # {comment}")] + aligned[1:]
        return out + [f"    for unit in (  # {comment}"] + ["            " + item for item in _fill(units, 104)] + [
            f"    ): {call}"]

    def train_fsdp2(self):
        out = self.shard()
        rows = "slice(rank * B, (rank + 1) * B)"
        if not self.divergence:
            return out + self.optimizer("    ") + self.plain_loop(
                "    ", "model", *RANK_ROWS, self.sync()[2] and ("fsdp2", "model.set_requires_gradient_sync"))
        call = f"steps(model, {rows}{self.sync()[1]})"
        if self.quantity == "final weights":
            return out + [f"    {call}", *self.save("{n: p.full_tensor() for n, p in model.named_parameters()}")]
        return out + self.save(call)

    def train_torch(self):
        ddp = "nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)"
        rows = "slice(rank * B, (rank + 1) * B)"
        if not self.divergence:
            return [f"    ddp = {ddp}"] + self.optimizer("    ") + self.plain_loop(
                "    ", "ddp", *RANK_ROWS, self.sync()[2] and ("ddp", "ddp.no_sync"))
        out = [f"    ddp = {ddp}"]
        call = f"steps(ddp, {rows}{self.sync()[1]})"
        if self.quantity == "final weights":
            return out + [f"    {call}", *self.save("model.state_dict()")]
        return out + self.save(call)

    # -- the main block
    def launch(self):
        """The main block's start: spawn W ranks; `failure` the traceback (or the signal or exit
        code) of the first rank that raised or died, as torch.multiprocessing's join raises it."""
        spawn = "torch.multiprocessing.spawn(train, {folder}, nprocs=W{more})"
        raised = ("    except Exception as error: failure = str(error)  # the rank's traceback, or the signal or exit "
                  "code")
        if self.kind == "hang":
            return [
                'if __name__ == "__main__":  # a rank that finished leaves a file in `results`, then waits',
                "    results, failure = tempfile.mkdtemp(), \"\"",
                "    ranks = " + spawn.format(folder="(results,)", more=", join=False, daemon=True"),
                f"    try: any(ranks.join(1) or all(os.path.exists(f\"{{results}}/{{r}}\") for r in range(W)) "
                f"for _ in range({HANG_TIMEOUT_S}))",
                raised,
                "    stuck = [r for r in range(W) if not os.path.exists(f\"{results}/{r}\") and "
                "ranks.processes[r].is_alive()]",
                "    for r in stuck:  # each prints where it waits (faulthandler); the ranks, daemons, end with "
                "this process",
                "        os.kill(ranks.processes[r].pid, signal.SIGUSR1), ranks.processes[r].join(2)"]
        if self.divergence:
            return [
                'if __name__ == "__main__":  # each rank saves its numbers in `results`; spawn raises once a rank '
                'raised or died',
                "    try: " + spawn.format(folder="(results := tempfile.mkdtemp(),)", more=""),
                "    except Exception as error: sys.exit(print(error, \"\\nnot reproduced: it fails another way\") "
                "or 2)"]
        return [
            'if __name__ == "__main__":  # spawn raises once a rank raised or died, after stopping the others',
            "    failure = \"\"",
            "    try: " + spawn.format(folder="(tempfile.mkdtemp(),)", more=""),
            raised]

    def main(self):
        expect, kind = self.expect, self.kind
        out = self.launch()
        if kind == "hang":
            return out + [
                f"    print(failure or (f\"ranks {{stuck}} did not finish within {HANG_TIMEOUT_S} s\" if stuck else "
                "\"every rank finished\"))",
                *_choice(f"f\"reproduced: a hang: ranks {{stuck}} did not finish within {HANG_TIMEOUT_S} s\"",
                         "stuck and not failure",
                         "f\"not reproduced: {'it fails another way' if failure else 'every rank finished'}\""),
                "    sys.exit(1 if stuck and not failure else 2 if failure else 0)"]
        if kind == "crash":
            items = []
            for failure in expect["failures"]:
                regexes, what = patterns(failure)
                items.append((literal(what), f"[{', '.join('r' + _raw(r) for r in regexes)}]"))
            return out + _table(items) + [
                "    print(failure or \"every rank finished\", f\"\\nexpected: {' or '.join(expected)}\")",
                "    matched = [what for what, regexes in expected.items() if all(re.search(r, failure, re.M) for r "
                "in regexes)]",
                *_choice("f\"reproduced: {matched[0]}\"", "matched",
                         "f\"not reproduced: {'it fails another way' if failure else 'every rank finished'}\""),
                "    sys.exit(1 if matched else 2 if failure else 0)"]
        return out + self.compare()

    def reference(self):
        """The reference's lines in the main block and the name of what it leaves (losses, norms,
        its AdamW): steps() on the whole global batches, or (DeepSpeed) the plain loop inline."""
        comment = "  # the reference: plain PyTorch, one process, the whole global batches"
        name = self.record or "adamw"
        if self.target != "deepspeed":
            return [f"    {name} = steps(model, slice(None)){comment}"], name
        loop = self.plain_loop("    ", "model", "x", "y")
        loop[0] += comment
        return self.optimizer("    ") + loop, name

    def compare(self):
        quantity, framework = self.quantity, self.levers.framework
        tolerance = f"{TOLERANCE[quantity]:.0e}".replace("e-0", "e-")
        reference, name = self.reference()
        if quantity == "final weights":
            return [
                "    start, ours, error = {n: p.detach().clone() for n, p in model.named_parameters()}, "
                "torch.load(f\"{results}/0\"), {}",
                *reference,
                "    for n, p in model.named_parameters():  # as the harness: the elements a gradient above 1e-5 moved "
                "(frozen: all)",
                "        moved = (adamw.state[p].get(\"exp_avg_sq\", torch.ones_like(p)) / (1 - "
                "ADAMW[\"betas\"][1])).sqrt() >= 1e-5",
                "        if ours[n].shape != p.shape: error[n] = f\"shape {list(ours[n].shape)}, the reference's "
                "{list(p.shape)}\"",
                "        elif (r := p.detach()[moved]).numel():  # the distance from the reference, over its update",
                "            error[n] = float((ours[n][moved] - r).norm() / ((r - start[n][moved]).norm() + 1e-6 * "
                "r.numel() ** 0.5))",
                f"    off = {{n: e for n, e in error.items() if isinstance(e, str) or not e <= {tolerance}}}  # name: "
                "its distance",
                *_choice("f\"reproduced: weights off the reference's: {off}\"", "off",
                         "f\"not reproduced: the weights agree: {error}\""),
                "    sys.exit(1 if off else 0)"]
        if quantity == "loss":
            label, floor = "losses", ""
            ours = ["    ours = [sum(r) / W for r in zip(*(torch.load(f\"{results}/{r}\") for r in range(W)))]  # the "
                    "mean over ranks"]
            where = "micro-step"
        else:
            label, floor, where = "gradient norms", " + 1e-5", "step"
            ours = ["    ours = torch.load(f\"{results}/0\")"]
        if quantity != "loss" and len(f"{ours[0]}, {reference[0][4:]}") <= WIDTH:  # rank 0's norms in its first line
            first, second = reference[0].split(" = ", 1)
            ours = [f"    ours, {first.strip()} = torch.load(f\"{{results}}/0\"), {second}"]
            reference = reference[1:]
        return ours + reference + [
            f"    print(\"{framework} {label}:\", ours, \"\\nreference {label}:\", {name})",
            f"    off = [s for s, (a, b) in enumerate(zip(ours, {name})) if not abs(a - b) <= {tolerance} * "
            f"abs(b){floor}]",
            *_choice(f"f\"reproduced: the {quantity} is off from {where} {{off[0]}}\"", "off",
                     f"\"not reproduced: the {label.split()[-1]} agree\""),
            "    sys.exit(1 if off else 0)"]

    def text(self):
        docstring, constants = self.header()
        body = self.model.code()
        if self.target == "deepspeed":
            body += fill_literal("CONFIG = ", deepspeed_settings(self.case))
        if self.divergence and self.target != "deepspeed":
            body += self.steps()
        body += self.train() + self.main()
        lines = docstring + [_fit(line) for line in self.imports("\n".join(body)) + constants + body]
        return "\n".join(lines) + "\n"


def _table(items):
    """`expected = {what: [regex, ...], ...}` on as few lines as fit in WIDTH characters."""
    comment = "  # what: the regexes its traceback matches"
    lines, pad = [], "    expected = {"
    for i, (what, regexes) in enumerate(items):
        end = "}" if i == len(items) - 1 else ","
        line = f"{pad}{what}: {regexes}{end}"
        if len(line) <= WIDTH:
            lines.append(line)
        else:
            lines += [f"{pad}{what}:", f"{' ' * 16}{regexes}{end}"]
        pad = " " * 16
    if len(lines[0]) + len(comment) <= WIDTH:
        lines[0] += comment
    return lines


def _choice(yes, condition, no):
    """print(yes if condition else no) on one line, or two."""
    line = f"    print({yes} if {condition} else {no})"
    return [line] if len(line) <= WIDTH else [f"    print({yes} if {condition}", f"          else {no})"]


def _fit(line, width=WIDTH):
    """A line over `width` loses its trailing comment (the code stays whole)."""
    if len(line) <= width or "  # " not in line:
        return line
    code = line[:line.rindex("  # ")]
    return code if code.count('"') % 2 == 0 and code.count("'") % 2 == 0 else line


def _raw(pattern):
    """A raw string literal of a regex (quotes chosen so that none needs escaping)."""
    return f'"{pattern}"' if '"' not in pattern else f"'{pattern}'"


def _fill(items, width):
    lines, line = [], ""
    for i, item in enumerate(items):
        piece = item + ","
        if line and len(line) + 1 + len(piece) > width:
            lines.append(line)
            line = piece
        else:
            line = f"{line} {piece}" if line else piece
    return lines + ([line] if line else [])


def write_repro(case_directory, answer, path, versions, target, signature, python, exact=False):
    """Writes the script of the finding `answer` (the runner's answer to the case in
    `case_directory`, judged `signature` by the harness) to `path`, executable; returns
    {"path", "lines", "expect"}. Its weights and data are drawn from the case's seed, or with
    `exact` are the case directory's own (init.safetensors, data.safetensors) as literals.
    Unsupported when no script can be written (why in its message); ValueError when the answer
    is no finding."""
    if target not in FRAMEWORK:
        raise ValueError(f"unknown target {target!r}")
    with open(os.path.join(case_directory, "case.json")) as file:
        case = json.load(file)
    expect = expectation(answer, signature)
    check_supported(case, target)
    numbers = None
    if exact:
        from zero3py.safetensors_io import read_safetensors
        numbers = tuple(read_safetensors(os.path.join(case_directory, f"{what}.safetensors"))
                        for what in ("init", "data"))
    script = Script(case, target, expect, versions or "versions not given", os.path.abspath(python),
                    os.path.basename(path), numbers)
    text = script.text()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as out:
        out.write(text)
    os.chmod(path, 0o755)
    return {"path": os.path.abspath(path), "lines": text.count("\n"), "expect": describe(expect)}


def run_line(path):
    """The command of the script's `Run:` line."""
    with open(path) as file:
        for line in file:
            if line.startswith("Run: "):
                return line[len("Run: "):].strip()
    raise ValueError(f"{path} has no Run: line")


def reproduce(case_directory, answer, path, versions, target, signature, python, timeout_s=VERIFY_TIMEOUT_S):
    """write_repro and verify_repro, in two forms: the script with seed-drawn weights and data,
    and, when that does not reproduce (a finding that needs the case's very numbers: an MoE's
    routing, a value at a threshold), the same script with the case's exact initial weights and
    data as literals, kept only when it reproduces and fits in LINE_CAP lines. Each run gets at
    most `timeout_s`, both together at most timeout_s + EXACT_GRACE_S (the harness waits
    timeout_s + 120 for the answer). -> verify_repro's keys and write_repro's ("path", "lines",
    "expect"; the last form written), and "form": "seeded" or "exact". Unsupported and
    ValueError as write_repro raises them (of the seeded form: the exact one only adds literals)."""
    written = write_repro(case_directory, answer, path, versions, target, signature, python)
    check = verify_repro(written["path"], timeout_s)
    if check["verified"]:
        return {**written, **check, "form": "seeded"}
    seeded = f"with weights and data drawn from the seed: {check['why']}"
    left = min(timeout_s, timeout_s + EXACT_GRACE_S - check["seconds"])
    try:
        exact = write_repro(case_directory, answer, path, versions, target, signature, python, exact=True)
    except (Unsupported, OSError, ValueError, KeyError) as error:
        return {**written, **check, "form": "seeded", "why": f"{seeded}; no script with the case's exact weights and "
                f"data: {type(error).__name__}: {error}"}
    if exact["lines"] > LINE_CAP:
        os.remove(exact["path"])
        return {**written, **check, "form": "seeded", "why": f"{seeded}; with the case's exact weights and data as "
                f"literals the script would take {exact['lines']} lines, over the cap of {LINE_CAP}"}
    if left < MIN_VERIFY_S:
        os.remove(exact["path"])
        return {**written, **check, "form": "seeded", "why": f"{seeded}; no time left ({left:.0f} s) to run the script "
                f"with the case's exact weights and data"}
    second = verify_repro(exact["path"], left)
    why = second["why"] if second["verified"] else f"{seeded}; with the case's exact weights and data: {second['why']}"
    return {**exact, **second, "form": "exact", "why": why, "seconds": round(check["seconds"] + second["seconds"], 1)}


# Variables the harness's processes may carry that would steer a script's own process group.
FOREIGN_ENV = ("PYTHONPATH", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


# What gloo's threads print when they abort a process at its exit (SIGABRT), after the script's work
# is done: now and then under load, in healthy scripts too, with or without destroy_process_group().
TEARDOWN_ABORT = "terminate called without an active exception"


def run_script(path, timeout_s):
    """Runs the script alone as its Run: line says (bash, in its folder, without PYTHONPATH or the
    harness's torchrun variables). -> (exit code or None on a timeout, its output, seconds)."""
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV}
    started = time.monotonic()
    process = subprocess.Popen(["bash", "-c", run_line(path)], cwd=os.path.dirname(path), env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               errors="replace", start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout_s)
        code = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the script's session: it and the ranks it spawned
        output, _ = process.communicate()
        code = None
    return code, output, round(time.monotonic() - started, 1)


def verify_repro(path, timeout_s=VERIFY_TIMEOUT_S):
    """Runs the script alone (run_script) and keeps it only when it exits 1 and prints
    `reproduced:`; otherwise removes it. A run that did not reproduce and died of gloo's abort at
    exit (TEARDOWN_ABORT) runs once more, and `why` says so: that abort is the interpreter's
    teardown, not the case. -> {"verified", "why", "exit_code", "output_tail", "seconds"}."""
    def verdict_of(lines):  # the script's last line saying whether it reproduced
        return next((line for line in reversed(lines) if line.startswith(("reproduced:", "not reproduced:"))), "")

    path = os.path.abspath(path)
    code, output, seconds = run_script(path, timeout_s)
    lines, retried = output.splitlines(), ""
    verdict = verdict_of(lines)
    if not (code == 1 and verdict.startswith("reproduced:")) and TEARDOWN_ABORT in output:
        code, output, more = run_script(path, timeout_s)
        seconds, retried = seconds + more, " (run twice: the first run died of gloo's abort at exit)"
        lines = output.splitlines()
        verdict = verdict_of(lines)
    verified = code == 1 and verdict.startswith("reproduced:")
    tail = "\n".join(lines[-40:])[-6000:]
    if verified:
        why = verdict + retried
    else:  # the exit, the verdict, and what the script printed just before it (the failure it saw)
        before = [line for line in lines if line.strip() and line != verdict][-4:]
        why = (f"no exit within {timeout_s} s" if code is None else f"exit {code}") + \
            f": {verdict or 'no verdict printed'}{retried}; its output ended: {' | '.join(before)[-600:]}"
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
    return {"verified": verified, "why": why, "exit_code": code, "output_tail": tail, "seconds": seconds}
