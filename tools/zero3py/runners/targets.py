"""The frameworks a runner trains a case with, one function per target, run on every rank of an
initialized gloo process group: train(case, rank, world, weights_path) -> {"losses", "grad_norms",
"weights"} (rank 0 writes the final weights under zero3's names). Each maps the case's pinned
settings onto the framework's own (PROTOCOL.md, "Targets"); an exception propagates to rank.py,
which reports it as the rank's failure. Activation checkpointing is the target's alone: the
reference (training.reference_run) never checkpoints, as recomputing does not change the math."""
import contextlib

import torch
import torch.distributed as dist
import torch.utils.checkpoint

from zero3py.runners.case import CHECKPOINT_TYPES
from zero3py.runners.deepspeed_bf16 import deepspeed_bf16_settings, deepspeed_master_weights, set_deepspeed_masters_
from zero3py.runners.memory import measured, steps
from zero3py.runners.mixed_precision import MasterWeights, f32_average_hook, finish_mixed_gradients
from zero3py.runners.training import (TrainingLoss, Unsupported, backward, build_case_model, final_weights, make_optimizer,
                                      train_steps, trainable)
from zero3py.safetensors_io import write_safetensors
from zero3py.torch_layers import CausalSelfAttention, LayerNorm, Linear, Mlp, Moe, RMSNorm, SwiGLU, TokenEmbedding

# zero3's leaf_modules names a layer type (these: the runners' modules of that type) or a module name.
LAYER_CLASSES = {"moe": Moe, "mlp": Mlp, "causal_self_attention": CausalSelfAttention, "embedding": TokenEmbedding,
                 "swiglu": SwiGLU}
# activation_checkpointing's layer types: the modules of exactly that class (`type(m) is cls`: an
# UnusedLinear, a subclass of Linear, is not checkpointed as a linear; a swiglu's gate, up and down are).
CHECKPOINT_CLASSES = {**LAYER_CLASSES, "linear": Linear, "layer_norm": LayerNorm, "rms_norm": RMSNorm}
assert set(CHECKPOINT_CLASSES) == set(CHECKPOINT_TYPES), "case.CHECKPOINT_TYPES and the classes disagree"


class Checkpointed:
    """A mixin that runs every call of its module under torch.utils.checkpoint (non-reentrant),
    the module's hooks included: what `checkpoint(module, x, use_reentrant=False)` in the parent's
    forward does, as Hugging Face's gradient checkpointing and torch's checkpoint_wrapper call it.
    So a framework's forward pre-hooks (ZeRO-3's fetch, FSDP2's unshard) run again when backward
    recomputes the module, as they do in users' models (its forward hooks may not: the
    recomputation stops once it has what backward saved)."""

    def __call__(self, *args):
        return torch.utils.checkpoint.checkpoint(super().__call__, *args, use_reentrant=False)


def checkpoint_activations_(model, type_names):
    """activation_checkpointing: each module of exactly one of these layer types gets a class of its
    own with Checkpointed first (its parameter names and isinstance tests unchanged). Done before a
    framework wraps the model (FSDP2 subclasses the class it finds, keeping Checkpointed's call)."""
    classes = {CHECKPOINT_CLASSES[name] for name in type_names}
    for module in model.modules():
        if type(module) in classes:
            module.__class__ = type(type(module).__name__, (Checkpointed, type(module)), {})


def mean_over_ranks(value, world):
    total = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(total)
    return float(total[0]) / world


def shard_group(case):
    """HSDP's block size when the case asks for blocks inside the world, else None (flat)."""
    group = case.zero.get("shard_group_size", 0)
    return group if 0 < group < case.world else None


def train_torch_ddp(case, rank, world, weights_path):
    """The control: DistributedDataParallel over gloo, find_unused_parameters (MoE experts and
    unused layers), no_sync on all but the last micro-step. It must agree with the reference. A
    shard group, the ZeRO stage, offloading and hpZ change nothing here: DDP shards nothing, and its
    sum over ranks is the same mean. Activation checkpointing it runs, as every target does."""
    if case.dtype == "bf16":
        return train_torch_ddp_bf16(case, rank, world, weights_path)
    model = build_case_model(case)
    checkpoint_activations_(model, case.checkpointed)
    ddp = torch.nn.parallel.DistributedDataParallel(TrainingLoss(model), find_unused_parameters=True)
    params = trainable(model)

    def micro_step(step, micro):
        with contextlib.nullcontext() if micro == case.gas - 1 else ddp.no_sync():
            loss = ddp(*case.rank_batch(step, micro, rank))
            backward(loss / case.gas)
        return loss.item()

    losses, norms = train_steps(case, params, make_optimizer(case, params), micro_step,
                                step_loss=lambda loss: mean_over_ranks(loss, world))
    if rank == 0:
        write_safetensors(weights_path, final_weights(model.named_parameters()))
    return {"losses": losses, "grad_norms": norms, "weights": weights_path}


def train_torch_ddp_bf16(case, rank, world, weights_path):
    """The control in bf16, as the reference trains (mixed_precision.py): DDP over the bf16 compute
    copy, f32 masters stepped by AdamW. Every micro-step is all-reduced through f32_average_hook
    (each rank's bf16 gradient widened to f32, averaged in f32) and accumulated into the masters in
    f32; no no_sync, which would accumulate the micro-steps' gradients in bf16, as zero3 never does."""
    model = build_case_model(case)
    weights = MasterWeights(model)
    checkpoint_activations_(model, case.checkpointed)
    ddp = torch.nn.parallel.DistributedDataParallel(TrainingLoss(model), find_unused_parameters=True)
    averaged, names = {}, {id(p): name for name, p in weights.compute.items()}
    ddp.register_comm_hook(averaged, f32_average_hook)
    params = weights.trainable()

    def micro_step(step, micro):
        if micro == 0:
            weights.refresh_()
        loss = ddp(*case.rank_batch(step, micro, rank))
        backward(loss)
        weights.take_gradients()  # DDP's bf16 rounding of the average: the hook kept it in f32
        weights.accumulate_({names[key]: grad for key, grad in averaged.items()})
        averaged.clear()
        return loss.item()

    losses, norms = train_steps(case, params, make_optimizer(case, params), micro_step, finish_mixed_gradients(case),
                                step_loss=lambda loss: mean_over_ranks(loss, world))
    if rank == 0:
        write_safetensors(weights_path, weights.weights())
    return {"losses": losses, "grad_norms": norms, "weights": weights_path}


def deepspeed_config(case):
    """The case's settings under DeepSpeed's keys, every one it has a default for that changes the
    math written out: fp32 (no loss scaling), clipping, no pre-division, the ZeRO stage and its
    sizes (the stage3_ ones at stage 3 only: stages 1 and 2 never read them), ZeRO-Offload's devices
    (unpinned, as the protocol pins it: DeepSpeed's CPU accelerator would not pin anyway) and ZeRO++
    hpZ's block."""
    zero = case.zero
    config = {"train_micro_batch_size_per_gpu": case.micro_batch, "gradient_accumulation_steps": case.gas,
            "train_batch_size": case.micro_batch * case.gas * case.world,
            "gradient_clipping": case.gradient_clipping, "fp16": {"enabled": False}, "bf16": {"enabled": False},
            "prescale_gradients": False, "gradient_predivide_factor": 1.0,
            "zero_allow_untested_optimizer": True, "zero_force_ds_cpu_optimizer": False,
            "steps_per_print": 1 << 30, "wall_clock_breakdown": False,
            "zero_optimization": {"stage": zero["stage"],
                                  "stage3_param_persistence_threshold": zero["param_persistence_threshold"],
                                  "stage3_prefetch_bucket_size": zero["prefetch_bucket_size"],
                                  "reduce_bucket_size": zero["reduce_bucket_size"],
                                  "stage3_max_live_parameters": zero["max_live_parameters"],
                                  "stage3_max_reuse_distance": zero["max_reuse_distance"],
                                  "overlap_comm": zero["overlap_comm"], "contiguous_gradients": False,
                                  "stage3_gather_16bit_weights_on_model_save": False}}
    settings = config["zero_optimization"]
    if case.stage != 3:
        for key in [key for key in settings if key.startswith("stage3_")]:
            del settings[key]
    if case.offload_optimizer != "none":
        settings["offload_optimizer"] = {"device": case.offload_optimizer, "pin_memory": False}
    if case.offload_param != "none":
        settings["offload_param"] = {"device": case.offload_param, "pin_memory": False}
    if case.hpz:
        settings["zero_hpz_partition_size"] = case.hpz
    if case.dtype == "bf16":
        config.update(deepspeed_bf16_settings())
    return config


def mark_leaves(model, names):
    """zero3's leaf_modules (a layer type or a module name) as DeepSpeed's z3 leaf modules."""
    from deepspeed.utils import set_z3_leaf_modules, set_z3_leaf_modules_by_name
    classes = [LAYER_CLASSES[n] for n in names if n in LAYER_CLASSES]
    if classes:
        set_z3_leaf_modules(model, classes)
    others = [n for n in names if n not in LAYER_CLASSES]
    if others:
        set_z3_leaf_modules_by_name(model, others)


def train_deepspeed(case, rank, world, weights_path):
    """ZeRO stage 1, 2 or 3 through deepspeed.initialize with a client torch.optim.AdamW (DeepSpeed's
    own Adam ops are not built: DS_BUILD_OPS=0), the model built before sharding as user code builds it.
    In bf16 (deepspeed_bf16.py) DeepSpeed casts the model and keeps f32 masters, set to the init's
    values and read back as the final weights."""
    import deepspeed
    if shard_group(case):
        raise Unsupported(f"shard_group_size {shard_group(case)}: DeepSpeed 0.19.8 removed MiCS (mics_shard_size), "
                          f"its hierarchical sharding")
    model = build_case_model(case)
    if case.stage == 3:
        # Both steer ZeRO-3's parameter gathering only: at stages 1 and 2 every rank holds every
        # parameter whole, and nothing reads the marks (only stage3.py and parameter_offload.py do).
        for _, module, param in model.external_parameters:
            deepspeed.zero.register_external_parameter(module, param)
        mark_leaves(model, case.zero["leaf_modules"])
    checkpoint_activations_(model, case.checkpointed)
    wrapped = TrainingLoss(model)
    engine, _, _, _ = deepspeed.initialize(model=wrapped, optimizer=make_optimizer(case, trainable(model)),
                                           config=deepspeed_config(case))
    losses, norms = [], []
    try:
        if case.dtype == "bf16":
            set_deepspeed_masters_(model, case.init)
        for step in steps(case):  # range(case.steps), measured when the case asks (memory.py)
            micro_losses = []
            for micro in range(case.gas):
                loss = engine(*case.rank_batch(step, micro, rank))
                backward(loss, engine.backward)  # DeepSpeed divides by gas itself
                engine.step()          # a no-op but at the gas boundary
                micro_losses.append(loss.item())
            norms.append(float(engine.get_global_grad_norm()))
            losses.append(mean_over_ranks(sum(micro_losses) / case.gas, world))
        if case.dtype == "bf16":
            weights = deepspeed_master_weights(model, case.init)  # a collective: every rank reads them
            if rank == 0:
                write_safetensors(weights_path, weights)
        else:
            # At stages 1 and 2 a no-op: no parameter is ZeRO-3's (GatheredParameters disables itself).
            with deepspeed.zero.GatheredParameters(list(wrapped.parameters())):
                if rank == 0:
                    write_safetensors(weights_path, final_weights(wrapped.named_parameters(), "model."))
    finally:
        engine.destroy()
    return {"losses": losses, "grad_norms": norms, "weights": weights_path}


def fully_shard_options(case):
    """fully_shard's keyword arguments for the case's ZeRO levers. reshard_after_forward: True at
    stage 3 (parameters resharded after forward, gathered again in backward); False at stages 1
    and 2 (kept unsharded from forward through backward: FSDP2's ZeRO-2-like mode; it has no mode
    that keeps gradients unsharded, so stage 1 runs as 2); hpZ's block G as the int G (after forward
    each parameter is resharded to blocks of G ranks, from which backward gathers: FSDP2's hpZ).
    Either offload is CPUOffloadPolicy: FSDP2 offloads the sharded parameters, their gradients and
    the optimizer step together (unpinned: its default pin_memory=True calls Tensor.pin_memory, which
    raises "Found no NVIDIA driver" on a machine without a GPU, _fsdp_param.py:365)."""
    options = {"reshard_after_forward": case.hpz or case.stage == 3}
    if case.dtype == "bf16":
        options["mp_policy"] = bf16_policy()
    if "cpu" in (case.offload_param, case.offload_optimizer):
        from torch.distributed.fsdp import CPUOffloadPolicy
        options["offload_policy"] = CPUOffloadPolicy(pin_memory=False)
    return options


def bf16_policy():
    """FSDP2's mixed precision as zero3's bf16: the sharded parameters stay f32 (the masters AdamW
    steps), the gathered ones are bf16 (forward and backward compute on them), and gradients are
    reduced, and accumulated under set_requires_gradient_sync(False), in f32. Inputs are not
    cast: a feature model's f32 inputs make it compute in f32 on the bf16 weights, as zero3's does,
    and a token model's ids and every target must stay exact (a bf16 id above 256 rounds)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy
    return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, cast_forward_inputs=False)


def train_fsdp2(case, rank, world, weights_path):
    """PyTorch's fully_shard (FSDP2) on every leaf module, every other layer with parameters and the root, over gloo on CPU
    (gloo's reduce_scatter: PyTorch PR #149869), on a 2-D mesh under HSDP, each call with the case's
    levers (fully_shard_options). Gradients come back as DTensors."""
    from torch.distributed.fsdp import fully_shard
    # HSDP: a 2-D mesh, replicated across blocks and sharded inside each block of consecutive ranks
    # (the mesh's last dimension varies fastest), zero3's mics_shard_size layout.
    mesh = None
    if shard_group(case):
        from torch.distributed.device_mesh import init_device_mesh
        group = shard_group(case)
        mesh = init_device_mesh("cpu", (world // group, group), mesh_dim_names=("replicate", "shard"))
    model = build_case_model(case)
    checkpoint_activations_(model, case.checkpointed)  # before fully_shard, which subclasses each unit's class
    wrapped = TrainingLoss(model)
    options = fully_shard_options(case)
    # zero3's leaf_modules as FSDP2 users write them: the leaf is one fully_shard unit over its whole
    # subtree (an MoE's experts gathered together), and nothing inside it is sharded apart.
    names = case.zero["leaf_modules"]
    classes = tuple(LAYER_CLASSES[n] for n in names if n in LAYER_CLASSES)
    leaves = [m for name, m in model.named_modules() if (classes and isinstance(m, classes)) or name in names]
    inside = {id(sub) for leaf in leaves for sub in leaf.modules() if sub is not leaf}
    for leaf in leaves:
        if id(leaf) not in inside:  # a leaf inside another leaf is part of that unit
            fully_shard(leaf, mesh=mesh, **options)
    inside.update(id(leaf) for leaf in leaves)
    for module in model.modules():
        if module is not model and id(module) not in inside and any(True for _ in module.parameters(recurse=False)):
            fully_shard(module, mesh=mesh, **options)
    fully_shard(wrapped, mesh=mesh, **options)
    params = trainable(model)

    def micro_step(step, micro):
        wrapped.set_requires_gradient_sync(micro == case.gas - 1)
        loss = wrapped(*case.rank_batch(step, micro, rank))
        backward(loss / case.gas)
        return loss.item()

    def finish(params):  # the gradients are DTensors: torch's own clipping reduces their norm
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)  # a DTensor like p: zero3's zero gradient
        norm = torch.nn.utils.clip_grad_norm_(params, case.gradient_clipping or float("inf"), foreach=False)
        return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)

    losses, norms = train_steps(case, params, make_optimizer(case, params), micro_step, finish,
                                step_loss=lambda loss: mean_over_ranks(loss, world))
    full = {name: (p.full_tensor() if hasattr(p, "full_tensor") else p) for name, p in model.named_parameters()}
    if rank == 0:
        write_safetensors(weights_path, final_weights(full.items()))
    return {"losses": losses, "grad_norms": norms, "weights": weights_path}


TARGETS = {"torch": train_torch_ddp, "deepspeed": train_deepspeed, "fsdp2": train_fsdp2}
# A case with measure_memory gets each rank's peak and held bytes per step in its answer (memory.py).
TARGETS = {name: measured(train) for name, train in TARGETS.items()}

