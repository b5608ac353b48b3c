"""The oracle's fixed settings: run sizes, the ds_config the runs use, the tolerances (the
docstring of tools/e2e/torch_oracle_test.py says where each number comes from) and the models compared,
with the f32 rounding of the hyperparameters that both sides use."""
import numpy as np

STEPS, GAS, MICRO, WORLD, SEED = 20, 2, 4, 4, 7
# What the runs are configured with (a ds_config.json); every value is used as its f32 rounding.
CONFIG = {"gradient_clipping": 1.0,
          "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "betas": [0.9, 0.95], "eps": 1e-8,
                                                    "weight_decay": 0.1}},
          "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}}
# Relative loss and gradient-norm differences per step, and final weights' difference as a fraction
# of the training update (weight_errors); the module docstring says where each number comes from.
TOLERANCE = {"f32": {"loss": 1e-5, "grad_norm": 1e-4, "weights": 1e-3},
             "bf16": {"loss": 1e-2, "grad_norm": 5e-2, "weights": 0.3},           # gpt: bf16 activations
             "bf16-weights": {"loss": 1e-5, "grad_norm": 1e-3, "weights": 1e-2}}  # sequential: f32 activations

# The built-in sequential models, copied from core/models/model_zoo.cc (keep in sync).
SEQUENTIAL = {
    "mlp-tiny": {"loss": "mse", "layers": [
        {"type": "linear", "out": 32}, {"type": "gelu"}, {"type": "linear", "out": 32}, {"type": "gelu"},
        {"type": "linear", "out": 4}]},
    "classifier-tiny": {"loss": "cross_entropy", "layers": [
        {"type": "linear", "out": 32}, {"type": "relu"}, {"type": "layer_norm"}, {"type": "linear", "out": 5}]},
    "zero-sized": {"loss": "mse", "layers": [
        {"type": "concat", "layers": [{"type": "linear", "out": 0}]},
        {"type": "linear", "out": 16}, {"type": "gelu"}, {"type": "linear", "out": 4}]},
    "repeat-tiny": {"loss": "mse", "layers": [
        {"type": "linear", "out": 16}, {"type": "gelu"},
        {"type": "repeat", "times": 3, "layers": [{"type": "linear", "out": 16}, {"type": "gelu"}]},
        {"type": "linear", "out": 4}]},
    "tied-tiny": {"loss": "mse", "layers": [
        {"type": "linear", "out": 16}, {"type": "gelu"},
        {"type": "tied_linear", "tie_to": "layers.0", "transpose": True}, {"type": "linear", "out": 4}]},
    # A token model: ids in, no input_width (model_spec leaves it out when a spec has a vocab).
    "transformer-tiny": {"vocab": 32, "context": 8, "loss": "cross_entropy", "layers": [
        {"type": "embedding", "dim": 16},
        {"type": "residual", "layers": [{"type": "layer_norm"},
                                        {"type": "causal_self_attention", "heads": 2, "bias": False}]},
        {"type": "residual", "layers": [{"type": "layer_norm"}, {"type": "linear", "out": 32}, {"type": "gelu"},
                                        {"type": "linear", "out": 16}]},
        {"type": "layer_norm"}, {"type": "tied_linear", "tie_to": "layers.0"}]},
}
INPUT_WIDTH = 8
GPT = {"vocab": 64, "context": 16, "layers": 2, "heads": 2, "width": 32}  # gpt-tiny
MODELS = ["gpt-tiny"] + list(SEQUENTIAL)


def f32(value):
    return float(np.float32(value))


def hyperparameters(config):
    """AdamW's and clipping's values in a ds_config (or a report's config), each rounded to f32."""
    params = config["optimizer"]["params"]
    return {"lr": f32(params["lr"]), "betas": tuple(f32(b) for b in params["betas"]), "eps": f32(params["eps"]),
            "weight_decay": f32(params["weight_decay"]), "gradient_clipping": f32(config["gradient_clipping"])}
