#!/usr/bin/env python3
"""Records a zero3 trace of a Hugging Face transformers causal LM built from its config class alone:
no weights are downloaded and nothing goes to the network, so any architecture transformers knows
can be replayed at scale before anyone has its checkpoint or its GPUs.

    record_torch_trace.py --hf gpt2 gpt2.json --seq-len 1024
    record_torch_trace.py --hf llama llama.json --config-json llama-2-7b.json --seq-len 4096 --bf16
    zero3 replay llama.json --ranks 1024 --hardware h100

The model is built and run on the `meta` device: tensors there have shapes and dtypes but no
storage, so a 7B model records in seconds without its 28 GB (recorded bytes come from shapes, and
hooks, TorchFunctionMode and autograd all run). If a model cannot run on meta, it is recorded on
the CPU instead, which needs the model's memory, and says so. One training micro-step is recorded:
the model's own LM loss with labels = the input ids, then backward.

Attention is asked for as "sdpa" (fused: keeps no seq_len^2 probabilities for backward); where
transformers or torch cannot give sdpa the model runs "eager", and the trace's notes say which.
Activation bytes that grow with seq_len^2 (eager attention's probabilities) are found by recording
again at half the length and written as {"linear": a, "quadratic": b}, so replay can rescale them.
Attention-score flops (4 * batch * seq_len^2 * hidden per layer, which no weight accounts for) are
written the same way on each innermost attention module.
"""
import argparse
import contextlib
import json
import sys
import time

import record_torch_trace as rec


def _first_line(error, limit=160):
    line = (str(error).splitlines() or [""])[0]
    return line if len(line) <= limit else line[:limit] + "..."


def build_config(transformers, model_type, layers=None, overrides=None):
    """The model type's default config (AutoConfig.for_model), with `overrides` (a dict of config
    fields, e.g. from --config-json) and `layers` applied: num_hidden_layers goes through the
    config's attribute_map, so it is n_layer for GPT-2 and num_hidden_layers for Llama."""
    fields = {"use_cache": False}  # a training step keeps no key/value cache
    fields.update(overrides or {})
    config = transformers.AutoConfig.for_model(model_type, **fields)
    if layers is not None:
        config.num_hidden_layers = layers
    return config


@contextlib.contextmanager
def on_device(torch, device):
    """Tensors created inside are created on `device`. torch 2.x has `with torch.device(...)`; torch
    1.13 does not, so there each registered parameter and buffer is moved as it is registered
    (accelerate's init_empty_weights does the same), one tensor on the CPU at a time."""
    if device == "cpu":
        yield
        return
    with _autocast_accepts(torch, device):
        if hasattr(torch.device(device), "__enter__"):
            with torch.device(device):
                yield
            return
        module = torch.nn.Module
        register_parameter, register_buffer = module.register_parameter, module.register_buffer

        def parameter_on_device(self, name, param):
            register_parameter(self, name, param)
            if param is not None and param.device.type != device:  # a tied weight is registered again
                moved = self._parameters[name]
                self._parameters[name] = type(moved)(moved.to(device), requires_grad=moved.requires_grad)

        def buffer_on_device(self, name, tensor, persistent=True):
            register_buffer(self, name, tensor, persistent)
            if tensor is not None and tensor.device.type != device:
                self._buffers[name] = tensor.to(device)

        module.register_parameter, module.register_buffer = parameter_on_device, buffer_on_device
        try:
            yield
        finally:
            module.register_parameter, module.register_buffer = register_parameter, register_buffer


@contextlib.contextmanager
def _autocast_accepts(torch, device):
    """Lets `torch.autocast(device_type="meta", ...)` through as the CPU's: Llama's rotary embedding
    (transformers 4.40) opens `torch.autocast(device_type=x.device.type, enabled=False)`, which torch
    rejects for meta ("unsupported scalarType" on 2.x, "must be 'cuda' or 'cpu'" on 1.13), and the
    CPU's autocast changes nothing for meta tensors."""
    autocast = torch.autocast

    class MetaAutocast(autocast):
        def __init__(self, device_type, *args, **kwargs):
            super().__init__("cpu" if device_type == device else device_type, *args, **kwargs)

    torch.autocast = MetaAutocast
    try:
        yield
    finally:
        torch.autocast = autocast


def build_model(torch, transformers, config, device, bf16):
    """(model, attention implementation): sdpa when transformers and torch offer it for this model,
    else eager (transformers raises for architectures without sdpa and for torch < 2.1.1)."""
    auto = transformers.AutoModelForCausalLM
    with on_device(torch, device):
        try:
            model, attention = auto.from_config(config, attn_implementation="sdpa"), "sdpa"
        except (ValueError, ImportError) as error:
            print(f"record_hf_trace: no sdpa attention for {config.model_type} here ({_first_line(error)}); "
                  "recording eager attention, which keeps the seq_len^2 probabilities", file=sys.stderr)
            model, attention = auto.from_config(config, attn_implementation="eager"), "eager"
    if bf16:
        model.to(torch.bfloat16)
    model.train()  # modules start in train mode; explicit, as dropout is part of the recorded step
    return model, attention


def record_micro_step(torch, model, batch, seq_len, vocab, device, steps=1):
    """`steps` optimizer steps of one micro-step each. Backward hooks are left off: Hugging Face
    models return ModelOutput objects from the root and the base model, on which PyTorch never
    fires full backward hooks, so the recorded backward order would always lack them and replay
    would report a backward_order difference that is not there."""
    if device == "cpu":
        ids = torch.randint(0, vocab, (batch, seq_len), generator=torch.Generator().manual_seed(0))
    else:
        ids = torch.zeros((batch, seq_len), dtype=torch.long, device=device)  # values are not stored on meta
    with on_device(torch, device):
        return rec.record(model, [({"input_ids": ids, "labels": ids}, None)], lambda output, _: output.loss,
                          steps=steps, batch=batch, seq_len=seq_len, backward_hooks=False)


def _slots(trace):
    return [e for step in trace["steps"] for e in step["events"]]


def split_quadratic(full, half, ratio):
    """Splits each activation byte count of `full` (recorded at seq_len) into the part linear in
    seq_len and the part growing with seq_len^2, from `half` (the same model at ratio * seq_len):
    v_full = l + q and v_half = ratio * l + ratio^2 * q. Counts that fit neither (a size independent
    of seq_len) stay plain numbers. False when the two recordings' events differ."""
    strip = lambda events: [e[:2] if e[0] in ("enter", "call") else e for e in events]
    full_events, half_events = _slots(full), _slots(half)
    if strip(full_events) != strip(half_events):
        return False
    for event, other in zip(full_events, half_events):
        if event[0] not in ("enter", "call") or len(event) < 4 or len(other) < 4:
            continue
        value, smaller = event[3], other[3]
        quadratic = round((smaller - ratio * value) / (ratio * ratio - ratio))
        if value * 1e-6 < quadratic <= value:
            event[3] = {"linear": value - quadratic, "quadratic": quadratic}
    return True


def _has_quadratic_bytes(trace):
    return any(len(e) > 3 and isinstance(e[3], dict) for e in _slots(trace) if e[0] in ("enter", "call"))


def attention_flops(trace, hidden, batch, seq_len):
    """4 * batch * seq_len^2 * hidden forward flops (QK^T and probabilities times V) on the innermost
    modules whose type ends in "Attention", which own no weight for them; causal masking is not
    subtracted (as tools/recorders/make_model_traces.py)."""
    names = [m[0] for m in trace["modules"] if m[1].endswith("Attention")]
    innermost = {n for n in names if not any(o.startswith(n + ".") for o in names)}
    flops = {"linear": 0, "quadratic": 4 * batch * seq_len * seq_len * hidden}
    for event in _slots(trace):
        if event[0] in ("enter", "call") and event[1] in innermost:
            if len(event) < 3:
                event.append(None)
            if isinstance(event[2], int):
                event[2] = {"linear": event[2], "quadratic": flops["quadratic"]}
            else:
                event[2] = dict(flops)


def record_hf(model_type, layers=None, batch=1, seq_len=None, overrides=None, bf16=False, device="meta", steps=1):
    """The trace (a dict) of `steps` optimizer steps of one training micro-step each of `model_type`
    built from its config (a second step replays alike, but replay then shows the steady state:
    the previous step's prefetch overlapping)."""
    import torch
    import transformers

    config = build_config(transformers, model_type, layers, overrides)
    positions = getattr(config, "max_position_embeddings", None)
    seq_len = seq_len or positions or 1024
    if positions and seq_len > positions:
        print(f"record_hf_trace: seq_len {seq_len} is past the config's max_position_embeddings {positions}",
              file=sys.stderr)
    try:
        model, attention = build_model(torch, transformers, config, device, bf16)
        full = record_micro_step(torch, model, batch, seq_len, config.vocab_size, device, steps)
        quadratic = "not probed (seq_len 1)"
        if seq_len >= 2:
            half = record_micro_step(torch, model, batch, seq_len // 2, config.vocab_size, device, steps)
            quadratic = (f"split by a second recording at seq_len {seq_len // 2}"
                         if split_quadratic(full, half, (seq_len // 2) / seq_len)
                         else "not split: the recording at half the length ran different events")
    except Exception as error:  # an op without a meta kernel, a model creating CPU tensors mid-forward
        if device == "cpu":
            raise
        print(f"record_hf_trace: recording on the {device} device failed ({type(error).__name__}: "
              f"{_first_line(error)}); recording on the CPU instead, "
              "which needs the model's memory", file=sys.stderr)
        return record_hf(model_type, layers, batch, seq_len, overrides, bf16, "cpu", steps)
    attention_flops(full, config.hidden_size, batch, seq_len)
    if attention == "sdpa":
        kept = "fused: no seq_len^2 probabilities kept"
    elif _has_quadratic_bytes(full):
        kept = "unfused: keeps seq_len^2 probabilities, counted where a leaf module returns them"
    else:
        kept = "unfused: keeps seq_len^2 probabilities, not counted: no leaf module returns them"
    notes = " ".join([
        f"Hugging Face transformers {transformers.__version__} {type(model).__name__} built from",
        f"AutoConfig.for_model({model_type!r}) ({config.num_hidden_layers} layers, hidden {config.hidden_size},",
        f"vocab {config.vocab_size}; no weights), torch {torch.__version__} on the {device} device,",
        f"{'bf16' if bf16 else 'f32'}; {steps} optimizer step(s) of one training micro-step of {batch} x {seq_len}",
        f"tokens, loss = the model's LM loss with labels = input ids. attn_implementation={attention!r} ({kept}).",
        "activation_bytes: each leaf module's outputs (ops between leaves are not seen);",
        f"seq_len^2 parts {quadratic}. Flops: replay's 2 * tokens * weights, plus attention scores",
        "4 * batch * seq_len^2 * hidden per layer."])
    body = ("modules", "params", "steps")
    trace = {key: value for key, value in full.items() if key not in body}
    trace.update(name=f"hf-{model_type}", notes=notes)
    trace.update((key, full[key]) for key in body)
    return trace


def add_arguments(parser):
    parser.add_argument("--layers", type=int, help="with --hf: num_hidden_layers (default: the config's)")
    parser.add_argument("--batch", type=int, default=1, help="with --hf: sequences per micro-step (default 1)")
    parser.add_argument("--seq-len", type=int, help="with --hf: tokens per sequence (default: max_position_embeddings)")
    parser.add_argument("--config-json", metavar="FILE", help="with --hf: a JSON object of config fields to set")
    parser.add_argument("--bf16", action="store_true", help="with --hf: record the model in bfloat16")
    parser.add_argument("--steps", type=int, default=1,
                        help="with --hf: optimizer steps to record (default 1; 2 lets replay show the steady state)")
    parser.add_argument("--device", choices=("meta", "cpu"), default="meta",
                        help="with --hf: where to build and run the model (default meta: no memory for weights)")


def run(args):
    """record_torch_trace.py --hf MODEL_TYPE OUT.json: records, writes, and says what it did."""
    model_type, out = args.hf
    overrides = None
    if args.config_json:
        with open(args.config_json) as source:
            overrides = json.load(source)
    started = time.time()
    trace = record_hf(model_type, args.layers, args.batch, args.seq_len, overrides, args.bf16, args.device,
                      args.steps)
    rec.write(trace, out)
    print(f"wrote {out}: {len(trace['modules'])} modules, {len(trace['params'])} parameters, "
          f"batch {trace['batch']} x seq_len {trace['seq_len']}, recorded in {time.time() - started:.1f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Record a zero3 trace of a Hugging Face causal LM")
    parser.add_argument("--hf", nargs=2, metavar=("MODEL_TYPE", "OUT"), required=True)
    add_arguments(parser)
    run(parser.parse_args())
