"""A case directory of the runner protocol (PROTOCOL.md beside this file): reading one, as every
runner does, and writing one, as the tests do and as `zero3 fuzz --target` will in C++.

    case = read_case(directory)           # case.json checked, with init weights and data loaded
    x, y = case.rank_batch(step, micro, rank)
"""
import json
import os

from zero3py.safetensors_io import read_safetensors, write_safetensors

PROTOCOL_VERSION = 1
# Every key case.json must have: a setting a framework has a default for is never left to it.
REQUIRED = {"zero3_case": int, "model": dict, "world": int, "steps": int, "seed": int, "micro_batch": int,
            "gas": int, "dtype": str, "optimizer": dict, "gradient_clipping": (int, float), "loss_scaling": str,
            "zero": dict, "torch": dict, "timeout_s": (int, float)}
OPTIMIZER_KEYS = {"type", "lr", "betas", "eps", "weight_decay", "bias_correction"}
ZERO_KEYS = {"stage", "param_persistence_threshold", "prefetch_bucket_size", "reduce_bucket_size",
             "max_live_parameters", "max_reuse_distance", "overlap_comm", "leaf_modules"}
# Optional in /zero, absent in older cases (absent is off, so an older case means what it meant):
# HSDP's block of shard_group_size consecutive ranks (sharded inside it, replicated across blocks;
# absent or 0 is flat sharding over the world), ZeRO-Offload's devices, and ZeRO++ hpZ's block of
# hpz_partition_size ranks holding a secondary copy of each parameter (absent, 0 or 1: none).
ZERO_OPTIONAL_KEYS = {"shard_group_size", "offload_optimizer", "offload_param", "hpz_partition_size"}
ZERO_STAGES = (1, 2, 3)
# f32, or bf16 as zero3 trains it: f32 master weights, a bf16 compute copy (PROTOCOL.md, "bf16").
DTYPES = ("f32", "bf16")
OFFLOAD_DEVICES = ("none", "cpu")
TORCH_KEYS = {"raw_access", "raw_gradient"}
# Optional at the top level: the zero3 layer types whose modules run under activation checkpointing
# in the target's training (targets.CHECKPOINT_CLASSES maps each to its torch module class).
# measure_memory: true asks each rank for its peak live tensor bytes per step (memory.py; absent is false).
OPTIONAL = {"activation_checkpointing", "measure_memory"}
CHECKPOINT_TYPES = ("linear", "layer_norm", "causal_self_attention", "embedding", "moe", "mlp", "rms_norm", "swiglu")


class CaseError(ValueError):
    """A case directory that does not follow PROTOCOL.md (a problem of its writer, not a finding)."""


class Case:
    def __init__(self, directory, settings, init, data):
        self.directory, self.settings, self.init, self.data = directory, settings, init, data
        for key in REQUIRED:
            setattr(self, key, settings[key])
        zero = settings["zero"]
        self.stage = zero["stage"]
        self.offload_optimizer = zero.get("offload_optimizer", "none")
        self.offload_param = zero.get("offload_param", "none")
        self.hpz = hpz_group(settings)  # ZeRO++ hpZ's block size, or None
        self.checkpointed = list(settings.get("activation_checkpointing", []))

    def global_batch(self, step, micro):
        """Micro-step (step, micro)'s inputs and targets of all W ranks, rank r's rows r*B..(r+1)*B."""
        return self.data[f"step{step}.micro{micro}.inputs"], self.data[f"step{step}.micro{micro}.targets"]

    def rank_batch(self, step, micro, rank):
        x, y = self.global_batch(step, micro)
        rows = slice(rank * self.micro_batch, (rank + 1) * self.micro_batch)
        return x[rows], y[rows]


def hpz_group(settings):
    """ZeRO++ hpZ's block size G when the case has one (G > 1), else None."""
    group = settings["zero"].get("hpz_partition_size", 0)
    return group if group > 1 else None


def is_count(value):
    return isinstance(value, int) and not isinstance(value, bool)


def check_levers(settings, where):
    """CaseError for a ZeRO stage, offload device, hpZ block or checkpointed layer type the
    protocol does not define, or a combination it rules out (PROTOCOL.md, case.json)."""
    zero, world = settings["zero"], settings["world"]
    stage = zero["stage"]
    if not is_count(stage) or stage not in ZERO_STAGES:
        raise CaseError(f"{where}: /zero/stage is {stage!r}, expected one of {list(ZERO_STAGES)}")
    for key in ("offload_optimizer", "offload_param"):
        if zero.get(key, "none") not in OFFLOAD_DEVICES:
            raise CaseError(f"{where}: /zero/{key} is {zero[key]!r}, expected one of {list(OFFLOAD_DEVICES)}")
    if zero.get("offload_param", "none") != "none" and stage != 3:
        raise CaseError(f"{where}: /zero/offload_param is {zero['offload_param']!r} at /zero/stage {stage}; "
                        f"parameters are offloaded at stage 3 only (stages 1 and 2 keep them whole on every rank)")
    group = zero.get("hpz_partition_size", 0)
    if not is_count(group) or group < 0:
        raise CaseError(f"{where}: /zero/hpz_partition_size is {group!r}, expected an integer >= 0")
    if group > 1:
        shard = zero.get("shard_group_size", 0)
        if stage != 3 or world % group or group >= world or 0 < shard < world:
            raise CaseError(f"{where}: /zero/hpz_partition_size is {group} (world {world}, stage {stage}, "
                            f"shard_group_size {shard}); expected 0 or 1 (none), or a divisor G of /world with "
                            f"1 < G < /world at /zero/stage 3 without a shard_group_size inside the world")
    names = settings.get("activation_checkpointing", [])
    if not isinstance(names, list) or any(name not in CHECKPOINT_TYPES for name in names):
        raise CaseError(f"{where}: /activation_checkpointing is {names!r}, expected a list of layer types from "
                        f"{list(CHECKPOINT_TYPES)}")


def check_settings(settings, where):
    """CaseError naming the first missing, unknown or mistyped key."""
    def keys(found, wanted, path):
        if set(found) != set(wanted):
            raise CaseError(f"{where}: {path} has keys {sorted(found)}; exactly {sorted(wanted)} are required")
    keys(set(settings) - OPTIONAL, REQUIRED, "/")
    for key, kind in REQUIRED.items():
        if not isinstance(settings[key], kind) or isinstance(settings[key], bool) and kind is int:
            raise CaseError(f"{where}: /{key} is {settings[key]!r}, expected {kind}")
    keys(settings["optimizer"], OPTIMIZER_KEYS, "/optimizer")
    keys(set(settings["zero"]) - ZERO_OPTIONAL_KEYS, ZERO_KEYS, "/zero")
    group = settings["zero"].get("shard_group_size", 0)
    if not isinstance(group, int) or isinstance(group, bool) or group < 0 or (group and settings["world"] % group):
        raise CaseError(f"{where}: /zero/shard_group_size is {group!r}, expected 0 or a divisor of /world "
                        f"({settings['world']})")
    keys(settings["torch"], TORCH_KEYS, "/torch")
    check_levers(settings, where)
    if not isinstance(settings.get("measure_memory", False), bool):
        raise CaseError(f"{where}: /measure_memory is {settings['measure_memory']!r}, expected true or false")
    if settings["dtype"] not in DTYPES:
        raise CaseError(f"{where}: /dtype is {settings['dtype']!r}, expected one of {list(DTYPES)}")
    if settings["zero3_case"] != PROTOCOL_VERSION:
        raise CaseError(f"{where}: /zero3_case is {settings['zero3_case']}, this runner reads {PROTOCOL_VERSION}")
    if settings["optimizer"]["type"] != "AdamW" or settings["loss_scaling"] != "off":
        raise CaseError(f"{where}: only optimizer AdamW with loss_scaling off is defined")


def read_case(directory):
    """The case in `directory`, its files read; CaseError when they do not follow PROTOCOL.md."""
    where = os.path.join(directory, "case.json")
    try:
        with open(where) as file:
            settings = json.load(file)
        check_settings(settings, where)
        init = read_safetensors(os.path.join(directory, "init.safetensors"))
        data = read_safetensors(os.path.join(directory, "data.safetensors"))
    except (OSError, json.JSONDecodeError, KeyError) as error:
        raise CaseError(f"{directory}: {type(error).__name__}: {error}") from error
    rows = settings["world"] * settings["micro_batch"]
    for step in range(settings["steps"]):
        for micro in range(settings["gas"]):
            for what in ("inputs", "targets"):
                tensor = data.get(f"step{step}.micro{micro}.{what}")
                if tensor is None or tensor.shape[0] != rows:
                    raise CaseError(f"{directory}: data.safetensors needs step{step}.micro{micro}.{what} with {rows} rows")
    return Case(directory, settings, init, data)


def default_settings(model, world, steps=3, seed=7, micro_batch=2, gas=1, dtype="f32"):
    """A case.json with every hyperparameter pinned to the values the tests use."""
    return {"zero3_case": PROTOCOL_VERSION, "model": model, "world": world, "steps": steps, "seed": seed,
            "micro_batch": micro_batch, "gas": gas, "dtype": dtype,
            "optimizer": {"type": "AdamW", "lr": 3e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1,
                          "bias_correction": True},
            "gradient_clipping": 1.0, "loss_scaling": "off",
            "zero": {"stage": 3, "param_persistence_threshold": 0, "prefetch_bucket_size": 0,
                     "reduce_bucket_size": 500_000_000, "max_live_parameters": 1_000_000_000,
                     "max_reuse_distance": 0, "overlap_comm": False, "leaf_modules": []},
            "torch": {"raw_access": "cached_reference", "raw_gradient": False}, "timeout_s": 60}


def write_case(directory, settings, init, data):
    """Writes case.json, init.safetensors (name -> tensor) and data.safetensors (PROTOCOL.md's keys)."""
    os.makedirs(directory, exist_ok=True)
    check_settings(settings, directory)
    with open(os.path.join(directory, "case.json"), "w") as out:
        json.dump(settings, out, indent=1)
    write_safetensors(os.path.join(directory, "init.safetensors"), init, {"format": "pt"})
    write_safetensors(os.path.join(directory, "data.safetensors"), data)
