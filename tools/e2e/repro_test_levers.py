"""repro_test.py's cases of ZeRO's and FSDP2's levers (PROTOCOL.md, case.json and "Targets"): the
healthy cases whose scripts run, and the random levers the line sweep writes every case with again."""

# The keys settings_of puts into /zero (activation_checkpointing goes to the top level).
ZERO_LEVERS = ("stage", "offload_optimizer", "offload_param", "hpz_partition_size")
# The most ZeRO's levers may add to a script (repro_levers.py): activation checkpointing's 3 lines
# (4 when its classes fill a line), and DeepSpeed's CONFIG 2 more (the offload blocks, hpZ's size,
# zero_force_ds_cpu_optimizer) or FSDP2's fully_shard arguments set apart (1, and 1 where the call
# then goes under its units). Levers can also take lines away: stages 1 and 2 drop ZeRO-3's keys.
LEVER_LINES = 6


# LLaMA's block in a feature model: RMSNorm and a SwiGLU (with biases) in a residual, then the head.
GATED = {"zero3_model_spec": 1, "name": "repro-test", "kind": "sequential", "input_width": 6, "loss": "mse", "layers": [
    {"type": "linear", "out": 8}, {"type": "residual", "layers": [{"type": "rms_norm"},
                                                               {"type": "swiglu", "hidden": 6, "bias": True}]},
    {"type": "rms_norm"}, {"type": "linear", "out": 2}]}


def lever_cases(tokens, tokens_fsdp2, moe, small):
    """Healthy cases with ZeRO's and FSDP2's levers under each target, as repro_test.healthy_cases
    has them: a ZeRO stage below 3 with optimizer offload, stage 3 with parameter offload, hpZ in
    blocks of 2 of 4 ranks, activation checkpointing of attention, linears, layer norms, the
    embedding and an MoE with its experts (nested: the MoE's recomputation runs its experts' own),
    and of RMSNorms and a SwiGLU leaf under every target.
    The models: repro_test's token model (its FSDP2 form) and MoE, a small feature model, GATED."""
    return [
        ("deepspeed-levers-stage-2", "deepspeed", tokens,
         {"gas": 2, "stage": 2, "offload_optimizer": "cpu", "activation_checkpointing": ["causal_self_attention"]},
         "silent_divergence in the gradient norm"),
        ("deepspeed-levers-moe", "deepspeed", moe,
         {"leaf_modules": ["moe"], "micro_batch": 4, "steps": 1, "route": "same", "offload_param": "cpu",
          "activation_checkpointing": ["moe", "mlp"]}, "silent_divergence in the loss"),
        ("deepspeed-levers-hpz", "deepspeed", small,
         {"world": 4, "hpz_partition_size": 2, "activation_checkpointing": ["linear"]},
         "silent_divergence in the loss"),
        ("fsdp2-levers-stage-1", "fsdp2", tokens_fsdp2,
         {"gas": 2, "stage": 1, "offload_optimizer": "cpu", "activation_checkpointing": ["linear", "layer_norm"]},
         "silent_divergence in the loss"),
        ("fsdp2-levers-hpz", "fsdp2", small, {"world": 4, "hpz_partition_size": 2, "offload_param": "cpu",
                                              "activation_checkpointing": ["linear"]}, "silent_divergence in the loss"),
        ("torch-levers", "torch", tokens, {"offload_param": "cpu", "activation_checkpointing": [
            "causal_self_attention", "embedding"]}, "silent_divergence in the loss")] + [
        # A SwiGLU leaf (one DeepSpeed gather of gate, up and down; one FSDP2 unit), it and the RMSNorms checkpointed.
        (f"{target}-levers-swiglu", target, GATED, {"gas": 2, "leaf_modules": [] if target == "torch" else ["swiglu"],
                                                    "activation_checkpointing": ["rms_norm", "swiglu"]},
         "silent_divergence in the loss") for target in ("deepspeed", "fsdp2", "torch")]


def random_levers(rng, settings):
    """Random ZeRO levers and checkpointed layer types (some the model may lack), each valid."""
    zero = settings["zero"]
    zero["stage"] = rng.choice([1, 2, 3, 3])
    zero["offload_optimizer"] = rng.choice(["none", "cpu"])
    if zero["stage"] == 3:
        zero["offload_param"] = rng.choice(["none", "cpu"])
        if settings["world"] == 4 and not zero.get("shard_group_size") and rng.random() < 0.5:
            zero["hpz_partition_size"] = 2
    if rng.random() < 0.5:
        settings["activation_checkpointing"] = rng.sample(["linear", "layer_norm", "causal_self_attention", "embedding",
                                                           "moe", "mlp", "rms_norm", "swiglu"], rng.randint(1, 3))
