"""A finding as a standalone Python script for an upstream bug report: the case's model rebuilt
inline (repro_template.py.txt: torch and DeepSpeed only, no zero3 import), trained under DeepSpeed
at the case's world size over gloo, exiting 1 when the failure reproduces and 0 when it does not.

    write_repro(case_directory, answer, "repro.py")   # answer: the runner's, status crash/hang/ok

A crash reproduces when some rank's exception message holds the answer's stable fragment (an
upper-case identifier such as NOT_AVAILABLE, else its longest run of words); a hang or a dying
rank when a rank gives no answer; a divergence (an ok answer off its reference) when a step's loss
or gradient norm differs from the script's own unsharded run by more than the tolerance (relative;
norms below 1e-5 are noise). A divergence script exits 2 when DeepSpeed raises instead.
The script draws its own seeded weights and data: a report should not need the case's files.
"""
import json
import os
import re

from zero3py.runners.targets import deepspeed_config
from zero3py.runners.training import Unsupported

TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "repro_template.py.txt")
# The layer types the inline builder has (every sequential one but moe).
INLINE_TYPES = {"linear", "unused_linear", "tied_linear", "layer_norm", "gelu", "relu", "scale", "bias", "raw_scale",
                "concat", "repeat", "residual", "sum_residual"}


def all_layers(layers):
    for layer in layers:
        yield layer
        yield from all_layers(layer.get("layers", []))


def stable_fragment(message):
    """The part of an exception message that names the failure and not this run's numbers."""
    identifiers = re.findall(r"\b[A-Z][A-Z_]{7,}\b", message)
    if identifiers:
        return identifiers[0]
    return max(re.findall(r"[A-Za-z][A-Za-z ]{7,}[A-Za-z]", message), key=len, default=message)


def expectation(answer, divergence_tolerance):
    """(the script's EXPECT, a title): a message fragment, None for a hang or death, or a tolerance."""
    if answer["status"] not in ("crash", "hang", "ok"):
        raise ValueError(f"an answer of status {answer['status']} is no finding to reproduce")
    if answer["status"] == "crash":
        failed = [r for r in answer["ranks"] if r["state"] == "exception"]
        if failed:
            fragment = stable_fragment(failed[0]["message"])
            return fragment, f"DeepSpeed ZeRO-3 raises {failed[0]['exception_type']}: ... {fragment} ..."
        dead = [r for r in answer["ranks"] if r["state"] in ("signal", "exit")]
        return None, f"a DeepSpeed ZeRO-3 rank dies ({dead[0].get('signal') or dead[0].get('exit_code')})"
    if answer["status"] == "hang":
        return None, f"DeepSpeed ZeRO-3 hangs (ranks {answer['stuck']} never finish)"
    return divergence_tolerance, "DeepSpeed ZeRO-3 trains silently on a wrong loss (no error)"


def inline_gaps(case):
    """What of the case the script cannot express (its model is built inline, raw reads cached)."""
    layers = list(all_layers(case["model"]["layers"]))
    gaps = [f"layer type {t}" for t in sorted({layer["type"] for layer in layers} - INLINE_TYPES)]
    raw = [layer for layer in layers if layer["type"] == "raw_scale"]
    if raw and case["torch"]["raw_access"] not in ("cached_reference", "own_forward"):
        gaps.append(f"raw_access {case['torch']['raw_access']} (the script reads a cached Parameter or its owner's attribute)")
    if case["zero"]["leaf_modules"]:
        gaps.append(f"leaf_modules {case['zero']['leaf_modules']}")
    return gaps


def write_repro(case_directory, answer, path, versions="", divergence_tolerance=1e-4):
    """Writes the script to `path`; Unsupported when the case has what the script cannot express
    (inline_gaps); ValueError when the answer is not a finding (status other than crash, hang, ok)."""
    with open(os.path.join(case_directory, "case.json")) as file:
        case = json.load(file)
    model = case["model"]
    gaps = inline_gaps(case)
    if gaps:
        raise Unsupported(f"no standalone repro yet for {', '.join(gaps)}")
    expect, title = expectation(answer, divergence_tolerance)
    hyper = case["optimizer"]

    class Settings:  # what deepspeed_config reads
        micro_batch, gas, world, gradient_clipping, zero = (case["micro_batch"], case["gas"], case["world"],
                                                            case["gradient_clipping"], case["zero"])
    values = {"TITLE": title, "VERSIONS": versions or "torch and DeepSpeed", "NAME": os.path.basename(path),
              "SPEC": repr(model["layers"]), "INPUT_WIDTH": model["input_width"], "LOSS": repr(model["loss"]),
              "WORLD": case["world"], "STEPS": case["steps"], "GAS": case["gas"], "MICRO": case["micro_batch"],
              "RAW_GRADIENT": case["torch"]["raw_gradient"], "RAW_ACCESS": repr(case["torch"]["raw_access"]), "EXPECT": repr(expect),
              "ADAMW": repr({"lr": hyper["lr"], "betas": tuple(hyper["betas"]), "eps": hyper["eps"],
                             "weight_decay": hyper["weight_decay"]}),
              "CONFIG": repr(deepspeed_config(Settings))}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(TEMPLATE) as file:
        text = file.read()
    for key, value in values.items():
        text = text.replace(f"@{key}@", str(value))
    with open(path, "w") as out:
        out.write(text)
    os.chmod(path, 0o755)
    return path
