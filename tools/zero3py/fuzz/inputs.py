"""The fuzz's seed inputs, each valid (the runner checks that first): model specs and train configs
written from here (traces, a checkpoint and more configs are made or copied by the runner), the
config a loading spec mutant is trained under, and the caps a config mutant is trained at."""
import json


SPEC_SEEDS = {
    "gpt.json": {"zero3_model_spec": 1, "name": "gpt-fuzz", "kind": "gpt", "vocab": 16, "context": 8,
                 "layers": 1, "heads": 2, "width": 8},
    "mixed.json": {"zero3_model_spec": 1, "name": "mixed", "kind": "sequential", "input_width": 4,
                   "loss": "cross_entropy",
                   "layers": [{"type": "linear", "out": 8},
                              {"type": "repeat", "times": 2,
                               "layers": [{"type": "linear", "out": 8}, {"type": "gelu"}]},
                              {"type": "residual", "layers": [{"type": "moe", "experts": 3, "hidden": 4}]},
                              {"type": "residual", "layers": [{"type": "rms_norm"},
                                                              {"type": "swiglu", "hidden": 4, "bias": True}]},
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
# A GPT mutant with a longer context is inspected, not trained (attention costs context squared).
TRAIN_CONTEXT_MAX = 1024
# Mutated specs train under this config: every parameter sharded, and MoE layers as leaves, since
# without that a rank-divergent model rightly ends in exit 3 (a collective mismatch).
SPEC_TRAIN_CONFIG = {"zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0,
                                           "zero3_leaf_modules": ["moe"]}}

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
