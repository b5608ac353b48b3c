"""ZeRO's and FSDP2's levers in a repro script (repro.py writes the rest), as targets.py runs them:
the framework's name with its ZeRO stage, fully_shard's keyword arguments, whether DeepSpeed's
ZeRO-3-only calls belong in the script, and activation checkpointing as a user writes it: each
module of a checkpointed type gets a class whose __call__ runs it under torch.utils.checkpoint,
in train(rank) before the framework wraps the model (the reference, in the main process, trains
the plain model: recomputing does not change the math).

    levers = Levers(case, target, model)    # case: case.json as a dict; model: the ScriptModel
    levers.framework                        # "DeepSpeed ZeRO-2"
    levers.shard_arguments()                # ", reshard_after_forward=False"
    levers.checkpoint_lines()              # train(rank)'s lines checkpointing the chosen modules
"""
from zero3py.runners.case import Case
from zero3py.runners.repro_text import WIDTH

FRAMEWORK = {"deepspeed": "DeepSpeed ZeRO-3", "fsdp2": "FSDP2 (fully_shard)", "torch": "DDP"}
# The script's class of each layer type activation_checkpointing (and leaf_modules) may name, as
# targets.CHECKPOINT_CLASSES has the runner's (an MoE's experts: Levers.checkpointed says which).
SCRIPT_CLASSES = {"moe": "Moe", "mlp": "Mlp", "causal_self_attention": "CausalSelfAttention",
                  "embedding": "nn.Embedding", "linear": "nn.Linear", "layer_norm": "nn.LayerNorm",
                  "rms_norm": "nn.RMSNorm", "swiglu": "SwiGLU"}
# Which layer kinds of a spec bring a module of each class: nn.Linear is also an attention's qkv and
# proj, an MoE's gate and experts' fc and proj and a SwiGLU's gate, up and down (an unused_linear
# is a subclass: not one).
BROUGHT_BY = {"linear": {"linear", "causal_self_attention", "moe", "swiglu"}, "mlp": {"moe"}}


class Levers:
    def __init__(self, case, target, model):
        self.target = target
        self.settings = Case(None, case, None, None)  # its stage, offloads, hpZ block, checkpointed types
        self.stage = self.settings.stage
        self.framework = f"DeepSpeed ZeRO-{self.stage}" if target == "deepspeed" else FRAMEWORK[target]
        # An MoE's experts are nn.Sequential unless DeepSpeed's set_z3_leaf_modules needs their class
        # (leaf_modules "mlp": Mlp); nothing else in a script is one, so the type picks the experts.
        self.mlp_class = self.zero3_calls and "mlp" in case["zero"]["leaf_modules"]
        present = [name for name in dict.fromkeys(self.settings.checkpointed)
                   if BROUGHT_BY.get(name, {name}) & model.kinds]  # a type the model lacks checkpoints nothing
        self.checkpointed = [("Mlp" if self.mlp_class else "nn.Sequential") if name == "mlp" else SCRIPT_CLASSES[name]
                             for name in present]

    @property
    def zero3_calls(self):
        """DeepSpeed's set_z3_leaf_modules and register_external_parameter: at stage 3 only, as the
        runner calls them (stages 1 and 2 keep every parameter whole and never read them)."""
        return self.target == "deepspeed" and self.stage == 3

    def shard_arguments(self):
        """fully_shard's keyword arguments past the mesh (targets.fully_shard_options): stage 3's
        reshard_after_forward=True is FSDP2's default for every unit but the root, whose False
        changes nothing the script checks, so it is left out."""
        settings, out = self.settings, ""
        if settings.hpz:
            out += f", reshard_after_forward={settings.hpz}"
        elif self.stage != 3:
            out += ", reshard_after_forward=False"
        if "cpu" in (settings.offload_param, settings.offload_optimizer):
            out += ", offload_policy=fsdp.CPUOffloadPolicy(pin_memory=False)"
        return out

    def checkpoint_lines(self, pad="    "):
        """train(rank)'s lines giving each module of a checkpointed class a class of its own whose
        __call__ runs nn.Module's (hooks included) under torch.utils.checkpoint: the runner's
        Checkpointed mixin (targets.py) in fewer lines, before the framework wraps the model."""
        if not self.checkpointed:
            return []
        pieces = [f"{name}," for name in self.checkpointed]  # a tuple of one keeps its comma
        pieces[-1] = (pieces[-1] if len(pieces) == 1 else pieces[-1][:-1]) + ")]:"
        head = f"{pad}for m in [m for m in model.modules() if type(m) in ("
        lines, line = [], head + pieces[0]
        for piece in pieces[1:]:  # the classes filled into lines of at most WIDTH, aligned under the first
            if len(line) + 1 + len(piece) > WIDTH:
                lines.append(line)
                line = " " * len(head) + piece
            else:
                line += " " + piece
        comment = "  # activation checkpointing"
        lines.append(line + comment if len(line + comment) <= WIDTH else line)
        return lines + [f"{pad}    m.__class__ = type(type(m).__name__, (type(m),), dict(__call__=lambda *a: "
                        f"torch.utils.checkpoint.checkpoint(",
                        f"{pad}        nn.Module.__call__, *a, use_reentrant=False)))  # each call under it, hooks "
                        f"included: `checkpoint(m, x)`"]
