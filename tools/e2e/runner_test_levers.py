"""tools/e2e/runner_test.py's cases of ZeRO's and FSDP2's levers (PROTOCOL.md, case.json and
"Targets"): the ZeRO stage, ZeRO-Offload, ZeRO++ hpZ and activation checkpointing.

  * case.json's new keys are checked: each bad value is a CaseError naming its JSON path and what
    was expected, and a case without them (or with them off) reads as before;
  * activation checkpointing really recomputes: a checkpointed module's forward pre-hooks run again
    in backward (twice per step), an UnusedLinear is no linear, and the parameter names do not change;
  * each lever under every target (torch, deepspeed, fsdp2), one runner each for all of them: the
    torch control agrees with the reference, and so do DeepSpeed and FSDP2 on these healthy models
    (on CPU over gloo every lever runs: none is answered unsupported).
"""
import json
import os
import time

import torch

from zero3py.runners.case import CaseError, check_settings, default_settings, write_case
from zero3py.runners.compare import differences
from zero3py.runners.targets import checkpoint_activations_
from zero3py.safetensors_io import read_safetensors
from zero3py.torch_model import build_model, named_tensors

SEED, STEPS, MICRO, GAS = 7, 3, 2, 2
MLP = {"kind": "sequential", "input_width": 8, "loss": "mse", "layers": [
    {"type": "linear", "out": 16}, {"type": "gelu"}, {"type": "linear", "out": 4}]}
# Unused, frozen and bias-less layers, class-id targets: what ZeRO's flat partitions must get right.
DENSE = {"kind": "sequential", "input_width": 6, "loss": "cross_entropy", "layers": [
    {"type": "linear", "out": 8}, {"type": "layer_norm"}, {"type": "gelu"}, {"type": "unused_linear", "out": 5},
    {"type": "linear", "out": 8, "requires_grad": False}, {"type": "relu"},
    {"type": "linear", "out": 3, "bias": False}]}
# A small GPT (repro_test.py's TOKENS, its head untied: FSDP2 shards the embedding and the head apart).
TOKENS = {"kind": "sequential", "vocab": 13, "context": 4, "loss": "cross_entropy", "layers": [
    {"type": "embedding", "dim": 8},
    {"type": "residual", "layers": [{"type": "layer_norm"}, {"type": "causal_self_attention", "heads": 2,
                                                            "bias": False}]},
    {"type": "residual", "layers": [{"type": "layer_norm"}, {"type": "linear", "out": 16}, {"type": "gelu"},
                                    {"type": "linear", "out": 8}]},
    {"type": "layer_norm"}, {"type": "linear", "out": 13}]}
# name -> (model, world, /zero changes, /activation_checkpointing, leaf_modules)
LEVER_CASES = {
    "stage-1": (MLP, 2, {"stage": 1}, None, []),
    "stage-2": (DENSE, 2, {"stage": 2}, None, []),
    "offload-optimizer-stage-2": (DENSE, 2, {"stage": 2, "offload_optimizer": "cpu"}, None, []),
    "offload-param-stage-3": (MLP, 2, {"stage": 3, "offload_param": "cpu"}, None, []),
    "offload-both-stage-3": (TOKENS, 2, {"stage": 3, "offload_param": "cpu", "offload_optimizer": "cpu"}, None, []),
    "checkpoint-linear": (DENSE, 2, {"stage": 3}, ["linear"], []),
    "checkpoint-attention": (TOKENS, 2, {"stage": 3}, ["causal_self_attention"], ["causal_self_attention"]),
    "hpz-2-of-4": (TOKENS, 4, {"stage": 3, "hpz_partition_size": 2}, None, []),
}


def lever_case(work, name, model, world, zero, checkpointed, leaves, steps=STEPS, micro_batch=MICRO, gas=GAS,
               seed=SEED, dtype="f32", prefix="levers"):
    """A case directory: torch's seeded init of `model`, seeded data (token ids for a token model)."""
    directory = os.path.join(work, f"{prefix}-{name}")
    settings = default_settings(model, world, steps, seed, micro_batch, gas, dtype)
    settings["timeout_s"] = 30  # each trains in about a second once its ranks are up
    settings["zero"].update(zero, leaf_modules=list(leaves))
    if checkpointed is not None:
        settings["activation_checkpointing"] = checkpointed
    torch.manual_seed(seed)
    built = build_model(model)
    generator, rows, data = torch.Generator().manual_seed(seed), world * micro_batch, {}
    for step in range(steps):
        for micro in range(gas):
            if "vocab" in model:  # ids as F32, as zero3 writes them: the next token is the target
                ids = torch.randint(model["vocab"], (rows, model["context"] + 1), generator=generator).float()
                x, y = ids[:, :-1], ids[:, 1:]
            else:
                x = torch.randn(rows, model["input_width"], generator=generator)
                y = (torch.randint(built.out_width, (rows,), generator=generator).float()
                     if model["loss"] == "cross_entropy" else torch.randn(rows, built.out_width, generator=generator))
            data[f"step{step}.micro{micro}.inputs"], data[f"step{step}.micro{micro}.targets"] = x, y
    write_case(directory, settings, {n: p.detach() for n, p in named_tensors(built).items()}, data)
    return directory


def case_key_errors():
    """Each new key's bad values are CaseErrors naming the key's path and what it expects; the keys
    absent or off read as before. -> failures."""
    def settings(world=4, **zero):
        made = default_settings(MLP, world)
        made["zero"].update(zero)
        return made
    bad = [("/zero/stage", "expected one of [1, 2, 3]", settings(stage=4)),
           ("/zero/stage", "expected one of [1, 2, 3]", settings(stage=True)),
           ("/zero/offload_optimizer", "expected one of ['none', 'cpu']", settings(offload_optimizer="nvme")),
           ("/zero/offload_param", "expected one of ['none', 'cpu']", settings(offload_param=1)),
           ("/zero/offload_param", "stage 3 only", settings(stage=2, offload_param="cpu")),
           ("/zero/hpz_partition_size", "an integer >= 0", settings(hpz_partition_size=-1)),
           ("/zero/hpz_partition_size", "an integer >= 0", settings(hpz_partition_size=2.0)),
           ("/zero/hpz_partition_size", "at /zero/stage 3", settings(stage=2, hpz_partition_size=2)),
           ("/zero/hpz_partition_size", "a divisor G of /world", settings(hpz_partition_size=3)),
           ("/zero/hpz_partition_size", "1 < G < /world", settings(hpz_partition_size=4)),
           ("/zero/hpz_partition_size", "without a shard_group_size", settings(hpz_partition_size=2,
                                                                              shard_group_size=2))]
    for value, expected in (("linear", "expected a list"), (["unused_linear"], "expected a list of layer types"),
                            ([1], "expected a list of layer types")):
        made = settings()
        made["activation_checkpointing"] = value
        bad.append(("/activation_checkpointing", expected, made))
    unknown = settings()
    unknown["checkpointing"] = ["linear"]
    bad.append(("has keys", "are required", unknown))
    failures = []
    for path, expected, made in bad:
        try:
            check_settings(made, "case.json")
            failures.append(f"case.json with {path} {json.dumps(made.get('zero'))[:200]}: no CaseError")
        except CaseError as error:
            if path not in str(error) or expected not in str(error):
                failures.append(f"the CaseError for {path} must name it and say {expected!r}: {error}")
    good = [settings(), settings(stage=1, offload_optimizer="cpu"),
            settings(offload_param="cpu", offload_optimizer="none"),
            settings(hpz_partition_size=2), settings(hpz_partition_size=1, shard_group_size=2),
            settings(hpz_partition_size=2, shard_group_size=4)]
    good.append({**settings(), "activation_checkpointing": ["linear", "layer_norm", "causal_self_attention",
                                                            "embedding", "moe", "mlp", "rms_norm", "swiglu"]})
    for made in good:
        try:
            check_settings(made, "case.json")
        except CaseError as error:
            failures.append(f"a valid case.json is refused: {error}")
    print(f"  case.json's lever keys: {len(bad)} bad values refused, {len(good)} good ones read"
          f"{'' if not failures else ' (FAILED)'}")
    return failures


def checkpointing_errors():
    """checkpoint_activations_ on a model with every checkpointable type and an UnusedLinear: the
    chosen modules' pre-hooks run twice per step (forward, then the recomputation in backward), the
    others once, and the parameter names stay. -> failures."""
    model = {"kind": "sequential", "vocab": 7, "context": 3, "loss": "cross_entropy", "layers": [
        {"type": "embedding", "dim": 4}, {"type": "causal_self_attention", "heads": 2}, {"type": "layer_norm"},
        {"type": "unused_linear", "out": 3}, {"type": "moe", "experts": 1, "hidden": 4}, {"type": "rms_norm"},
        {"type": "swiglu", "hidden": 5}, {"type": "linear", "out": 7}]}
    # a linear inside the attention, the MoE and the SwiGLU too; none nested in another
    chosen = ["linear", "embedding", "rms_norm"]
    torch.manual_seed(SEED)
    built = build_model(model)
    names = [n for n, _ in built.named_parameters()]
    checkpoint_activations_(built, chosen)
    calls = {}
    for name, module in built.named_modules():
        # A pre-hook: the recomputation stops once it has what backward saved (non-reentrant
        # checkpoint's early stop), before a forward hook would run.
        module.register_forward_pre_hook(lambda *_, name=name: calls.__setitem__(name, calls.get(name, 0) + 1))
    ids = torch.randint(7, (2, 4)).float()
    loss, _ = built.loss(ids[:, :-1], ids[:, 1:])
    loss.backward()
    twice = {name for name, count in calls.items() if count == 2}
    expected = {"layers.0", "layers.1.qkv", "layers.1.proj", "layers.4.gate", "layers.4.experts.0.fc",
                "layers.4.experts.0.proj", "layers.5", "layers.6.gate", "layers.6.up", "layers.6.down", "layers.7"}
    failures = []
    if twice != expected:
        failures.append(f"checkpointing {chosen}: the modules recomputed are {sorted(twice)}, expected "
                        f"{sorted(expected)} (calls: {calls})")
    if [n for n, _ in built.named_parameters()] != names:
        failures.append("checkpointing renamed parameters")
    print(f"  activation checkpointing of {chosen}: {len(twice)} modules recomputed in backward"
          f"{'' if not failures else ' (FAILED)'}")
    return failures


def lever_cases(runner_for, work):
    """Every lever case under every target, one live runner per target (runner_for(target): its W=2
    and W=4 pools, which the bf16 cases reuse)."""
    failures = []
    directories = {name: lever_case(work, name, *spec) for name, spec in LEVER_CASES.items()}
    for target in ("torch", "deepspeed", "fsdp2"):
        runner = runner_for(target)
        started, line = time.monotonic(), []
        for name, directory in directories.items():
            answer = runner.ask(directory)
            if answer["status"] != "ok":
                failures.append(f"{target} {name}: status {answer['status']}: {json.dumps(answer)[:1500]}")
                line.append(f"{name} {answer['status']}")
                continue
            worst, breach = differences(answer, read_safetensors(os.path.join(directory, "init.safetensors")))
            line.append(f"{name} {max(worst):.0e}")
            if breach:
                failures.append(f"{target} {name} differs from its reference: {breach}")
        print(f"  {target} levers ({len(directories)} cases in {time.monotonic() - started:.1f} s, their ranks' "
              f"start included), the worst difference each: " + ", ".join(line), flush=True)
    return failures


def lever_errors(runner_for, work):
    return case_key_errors() + checkpointing_errors() + lever_cases(runner_for, work)
