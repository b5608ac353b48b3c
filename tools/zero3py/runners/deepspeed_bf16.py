"""DeepSpeed's bf16 as zero3's mixed precision (PROTOCOL.md, "Targets" in bf16): the ds_config keys
that change the math, the f32 masters set to the init's values after deepspeed.initialize, and
read back as the final weights. Measured with DeepSpeed 0.19.8 on CPU over gloo.

    config.update(deepspeed_bf16_settings())
    set_deepspeed_masters_(model, case.init)      # after deepspeed.initialize, on every rank
    weights = deepspeed_master_weights(model, case.init)   # a collective: on every rank
"""
import torch
import torch.distributed as dist


def numel(param):
    """The parameter's size, ZeRO-3's whole one for a partitioned parameter."""
    return param.ds_numel if hasattr(param, "ds_numel") else param.numel()


def deepspeed_bf16_settings():
    """ds_config's keys for zero3's bf16 (targets.deepspeed_config adds them): bf16 on without the
    overflow check (zero3 never skips a step; DeepSpeed's f32 has no check either; its stage-1
    BF16_Optimizer skips a step on a non-finite norm regardless), and the gradients averaged
    (communication_data_type) and accumulated (grad_accum_dtype) in f32, as zero3 does: DeepSpeed's
    defaults, bf16 for both, moved the weights up to 0.14 of the update where the order_probe moved
    them 0.004. f32 accumulation makes stage 1 DeepSpeed's BF16_Optimizer (engine.py
    _do_optimizer_sanity_check); bf16.immediate_grad_update changed nothing measured: left default."""
    return {"bf16": {"enabled": True, "check_grad_overflow": False},
            "communication_data_type": "fp32", "data_types": {"grad_accum_dtype": "fp32"}}


def deepspeed_master_weights(model, init):
    """DeepSpeed's f32 master weights under zero3's names (name -> tensor), read with
    deepspeed.utils.safe_get_full_fp32_param at every stage: a collective (an all-reduce of the
    ranks' fragments at stages 1 and 2, an all-gather of the partitions at stage 3), so every
    rank calls it. A frozen parameter has no master: DeepSpeed keeps only its bf16 copy, gathered
    here; when that is still the init's bf16 rounding nothing moved it, and its value is the init's
    (as zero3's master), else the bf16 value widened (it moved: a finding)."""
    import deepspeed
    from deepspeed.utils import safe_get_full_fp32_param
    named = dict(model.named_parameters())
    # A zero-element parameter has no master (ZeRO-3 leaves it out of its partitions: reading it
    # raises KeyError in stage3.py _get_fp32_opt_state_partition): it is its init, empty.
    weights = {name: safe_get_full_fp32_param(p) if numel(p) else init[name].clone()
               for name, p in named.items() if p.requires_grad}
    frozen = {name: p for name, p in named.items() if not p.requires_grad}
    with deepspeed.zero.GatheredParameters(list(frozen.values())):  # no-op at stages 1 and 2
        for name, p in frozen.items():
            kept = p.detach().float()
            weights[name] = init[name].clone() if torch.equal(kept, init[name].to(p.dtype).float()) else kept.clone()
    return {name: weights[name].detach().float().cpu().clone() for name in named}


def set_deepspeed_masters_(model, init):
    """DeepSpeed's f32 masters set to the init's f32 values, as zero3's are: deepspeed.initialize
    casts the module to bf16 first and builds its masters from that copy, which would start them
    at the init rounded to 8 bits (an error of up to 2^-9 of each weight, larger than a step's
    update of lr). Stages 1 and 2: safe_set_full_fp32_param, each rank its fragment. Stage 3: each
    rank its own partition (safe_set_local_fp32_param, the init padded as ZeRO-3 pads it), since
    0.19.8's safe_set_full_fp32_param raises "start (86) + length (43) exceeds dimension size
    (128)" on the last rank of a parameter whose size W does not divide (stage3.py:3196
    set_full_hp_param narrows the unpadded value by the padded partition). No collective."""
    from deepspeed.utils import safe_set_full_fp32_param, safe_set_local_fp32_param
    for name, param in model.named_parameters():
        if not param.requires_grad or not numel(param):  # an empty one has no master (deepspeed_master_weights)
            continue
        if not hasattr(param, "ds_id"):
            safe_set_full_fp32_param(param, init[name])
            continue
        size = param.ds_tensor.numel()
        index = dist.get_rank(group=getattr(param, "ds_process_group", None))
        padded = torch.zeros(size * dist.get_world_size(group=getattr(param, "ds_process_group", None)))
        padded[:param.ds_numel] = init[name].flatten()
        safe_set_local_fp32_param(param, padded[index * size:(index + 1) * size])
