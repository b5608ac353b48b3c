"""The frameworks a runner trains a case with, one function per target, run on every rank of an
initialized gloo process group: train(case, rank, world, weights_path) -> {"losses", "grad_norms",
"weights"} (rank 0 writes the final weights under zero3's names). Each maps the case's pinned
settings onto the framework's own (PROTOCOL.md, "Targets"); an exception propagates to rank.py,
which reports it as the rank's failure."""
import contextlib

import torch
import torch.distributed as dist

from zero3py.runners.training import (TrainingLoss, Unsupported, backward, build_case_model, final_weights, make_optimizer,
                                      train_steps, trainable)
from zero3py.safetensors_io import write_safetensors
from zero3py.torch_layers import CausalSelfAttention, Mlp, Moe, TokenEmbedding

# zero3's leaf_modules names a layer type (these: the runners' modules of that type) or a module name.
LAYER_CLASSES = {"moe": Moe, "mlp": Mlp, "causal_self_attention": CausalSelfAttention, "embedding": TokenEmbedding}


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
    shard group changes nothing here: DDP shards nothing, and its sum over ranks is the same mean."""
    model = build_case_model(case)
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


def deepspeed_config(case):
    """The case's settings under DeepSpeed's keys, every one it has a default for that changes the
    math written out: fp32 (no loss scaling), clipping, no pre-division, ZeRO-3's sizes."""
    zero = case.zero
    return {"train_micro_batch_size_per_gpu": case.micro_batch, "gradient_accumulation_steps": case.gas,
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
    """ZeRO-3 through deepspeed.initialize with a client torch.optim.AdamW (DeepSpeed's own Adam
    ops are not built: DS_BUILD_OPS=0), the model built before sharding as user code builds it."""
    import deepspeed
    if case.zero["stage"] != 3:
        raise Unsupported(f"zero stage {case.zero['stage']}: the deepspeed runner runs stage 3")
    if shard_group(case):
        raise Unsupported(f"shard_group_size {shard_group(case)}: DeepSpeed 0.19.8 removed MiCS (mics_shard_size), "
                          f"its hierarchical sharding")
    model = build_case_model(case)
    for _, module, param in model.external_parameters:
        deepspeed.zero.register_external_parameter(module, param)
    mark_leaves(model, case.zero["leaf_modules"])
    wrapped = TrainingLoss(model)
    engine, _, _, _ = deepspeed.initialize(model=wrapped, optimizer=make_optimizer(case, trainable(model)),
                                           config=deepspeed_config(case))
    losses, norms = [], []
    try:
        for step in range(case.steps):
            micro_losses = []
            for micro in range(case.gas):
                loss = engine(*case.rank_batch(step, micro, rank))
                backward(loss, engine.backward)  # DeepSpeed divides by gas itself
                engine.step()          # a no-op but at the gas boundary
                micro_losses.append(loss.item())
            norms.append(float(engine.get_global_grad_norm()))
            losses.append(mean_over_ranks(sum(micro_losses) / case.gas, world))
        params = list(wrapped.parameters())
        with deepspeed.zero.GatheredParameters(params):
            if rank == 0:
                write_safetensors(weights_path, final_weights(wrapped.named_parameters(), "model."))
    finally:
        engine.destroy()
    return {"losses": losses, "grad_norms": norms, "weights": weights_path}


def train_fsdp2(case, rank, world, weights_path):
    """PyTorch's fully_shard (FSDP2) on every leaf module, every other layer with parameters and the root, over gloo on CPU
    (gloo's reduce_scatter: PyTorch PR #149869), on a 2-D mesh under HSDP. Gradients come back as DTensors."""
    from torch.distributed.fsdp import fully_shard
    # HSDP: a 2-D mesh, replicated across blocks and sharded inside each block of consecutive ranks
    # (the mesh's last dimension varies fastest), zero3's mics_shard_size layout.
    mesh = None
    if shard_group(case):
        from torch.distributed.device_mesh import init_device_mesh
        group = shard_group(case)
        mesh = init_device_mesh("cpu", (world // group, group), mesh_dim_names=("replicate", "shard"))
    model = build_case_model(case)
    wrapped = TrainingLoss(model)
    # zero3's leaf_modules as FSDP2 users write them: the leaf is one fully_shard unit over its whole
    # subtree (an MoE's experts gathered together), and nothing inside it is sharded apart.
    names = case.zero["leaf_modules"]
    classes = tuple(LAYER_CLASSES[n] for n in names if n in LAYER_CLASSES)
    leaves = [m for name, m in model.named_modules() if (classes and isinstance(m, classes)) or name in names]
    inside = {id(sub) for leaf in leaves for sub in leaf.modules() if sub is not leaf}
    for leaf in leaves:
        if id(leaf) not in inside:  # a leaf inside another leaf is part of that unit
            fully_shard(leaf, mesh=mesh, reshard_after_forward=True)
    inside.update(id(leaf) for leaf in leaves)
    for module in model.modules():
        if module is not model and id(module) not in inside and any(True for _ in module.parameters(recurse=False)):
            fully_shard(module, mesh=mesh, reshard_after_forward=True)
    fully_shard(wrapped, mesh=mesh, reshard_after_forward=True)
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

