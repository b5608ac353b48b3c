#!/usr/bin/env python3
"""Writes the shipped shape traces (traces/models/*.json, format: traces/FORMAT.md) from the
architectures' published shapes; nothing is downloaded.

    tools/make_model_traces.py                 # (re)write traces/models/
    tools/make_model_traces.py --check DIR     # exit 1 if DIR's traces differ from what this writes

Every trace is SPMD (events stored once, "ranks": "all") except Mixtral, whose MoE routing differs
by rank: each layer's expert calls are a per-rank group, as small batches route them.
Flops of Linear calls are left out: replay derives them as 2 * tokens * weight elements. Explicit
flops are written where a module computes more than its weights say (attention scores, a tied LM
head). activation_bytes is each leaf module's output kept for backward, in bf16, at the trace's
tokens; attention probabilities are not stored (fused attention recomputes them). output_bytes, on
every enter and call but T5's position bias (it grows with seq_len^2), is the module's output in
bf16 at the trace's tokens: what activation checkpointing keeps of it.
"""
import argparse
import json
import os
import random
import sys

BF16 = 2


class TraceBuilder:
    def __init__(self, name, root_type, tokens, notes, world=None, one_sequence=True):
        self.header = {"zero3_trace": 1, "source": "tools/make_model_traces.py", "name": name, "dtype": "bf16"}
        if world:
            self.header["world"] = world
        self.header["tokens"] = tokens
        if one_sequence:  # the amounts below are one sequence's: replay --micro-batch/--seq-len rescale them
            self.header["batch"] = 1
            self.header["seq_len"] = tokens
        self.header["notes"] = notes
        self.tokens = tokens
        self.modules = [["", root_type]]
        self.params = []
        self.events = []

    def module(self, name, type_):
        self.modules.append([name, type_])
        return name

    def param(self, owner, local, shape, dtype="bf16"):
        # [id, name, shape] or [id, name, shape, dtype]: the owner is the name's prefix.
        name = f"{owner}.{local}" if owner else local
        self.params.append([len(self.params), name, list(shape)] + ([] if dtype == "bf16" else [dtype]))
        return name

    def linear(self, name, out_features, in_features, bias=False, type_="Linear"):
        self.module(name, type_)
        self.param(name, "weight", [out_features, in_features])
        if bias:
            self.param(name, "bias", [out_features])
        return name

    def norm(self, name, width, bias=True, type_="LayerNorm"):
        self.module(name, type_)
        self.param(name, "weight", [width])
        if bias:
            self.param(name, "bias", [width])
        return name

    def text(self):
        lines = ["{"]
        for key, value in self.header.items():
            lines.append(f" {json.dumps(key)}: {json.dumps(value)},")
        lines.append(' "modules": [')
        lines.append(",\n".join("  " + compact(m) for m in self.modules))
        lines.append(" ],")
        lines.append(' "params": [')
        lines.append(",\n".join("  " + compact(p) for p in self.params))
        lines.append(" ],")
        lines.append(' "steps": [')
        lines.append('  {"ranks": %s, "repeat": 2, "events": [' % json.dumps(self.step_ranks()))
        lines.append(",\n".join("   " + compact(e) for e in self.events))
        lines.append("  ]}")
        lines.append(" ]")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def step_ranks(self):
        groups = [len(e["per_rank"]) for e in self.events if isinstance(e, dict)]
        return groups[0] if groups else "all"


def compact(value):
    return json.dumps(value, separators=(",", ":"))


def quadratic(amount):
    """An amount that grows with batch x seq_len^2 (attention scores), not with tokens (FORMAT.md)."""
    return {"quadratic": amount}


def event(kind, name, flops=None, activation_bytes=None, output_bytes=None):
    """[KIND, M, FLOPS?, ACTIVATION_BYTES?, {"output_bytes": N}?] (FORMAT.md): the places are
    positional, so a later one given fills those before it (null flops: derived; 0 bytes)."""
    out = [kind, name]
    if flops is not None or activation_bytes or output_bytes:
        out.append(flops)
    if activation_bytes or output_bytes:
        out.append(activation_bytes or 0)
    if output_bytes:
        out.append({"output_bytes": output_bytes})
    return out


def call(name, flops=None, activation_bytes=None, output_bytes=None):
    return event("call", name, flops, activation_bytes, output_bytes)


def enter(name, flops=None, activation_bytes=None, output_bytes=None):
    return event("enter", name, flops, activation_bytes, output_bytes)


def gpt(name, layers, width, heads, vocab, context, notes):
    """GPT-2 / GPT-3 shaped decoder as zero3's gpt spec names it; the LM head is tied to wte."""
    t = TraceBuilder(name, "GPT", context, notes)
    tokens = context
    t.module("wte", "Embedding")
    t.param("wte", "weight", [vocab, width])
    t.module("wpe", "Embedding")
    t.param("wpe", "weight", [context, width])
    t.module("h", "ModuleList")
    hidden = tokens * width * BF16  # a [tokens, width] output: most modules'
    t.events += [call("wte", None, hidden, hidden), call("wpe", output_bytes=hidden)]
    for i in range(layers):
        block = t.module(f"h.{i}", "Block")
        t.norm(f"{block}.ln_1", width)
        attn = t.module(f"{block}.attn", "CausalSelfAttention")
        t.linear(f"{attn}.qkv", 3 * width, width, bias=True)
        t.linear(f"{attn}.proj", width, width, bias=True)
        t.norm(f"{block}.ln_2", width)
        mlp = t.module(f"{block}.mlp", "Mlp")
        t.linear(f"{mlp}.fc", 4 * width, width, bias=True)
        t.linear(f"{mlp}.proj", width, 4 * width, bias=True)
        t.events += [
            enter(block, output_bytes=hidden),
            call(f"{block}.ln_1", None, hidden, hidden),
            enter(attn, quadratic(4 * tokens * tokens * width), hidden, hidden),
            call(f"{attn}.qkv", None, 3 * hidden, 3 * hidden),
            call(f"{attn}.proj", None, hidden, hidden),
            ["exit", attn],
            call(f"{block}.ln_2", None, hidden, hidden),
            enter(mlp, output_bytes=hidden),
            call(f"{mlp}.fc", None, 4 * hidden, 4 * hidden),
            call(f"{mlp}.proj", None, hidden, hidden),
            ["exit", mlp],
            ["exit", block],
        ]
    t.norm("ln_f", width)
    t.module("lm_head", "TiedLinear")
    logits = tokens * vocab * BF16
    t.events += [
        call("ln_f", None, hidden, hidden),
        enter("lm_head", 2 * tokens * vocab * width, logits, logits),
        ["param", "lm_head", "wte.weight"],
        ["exit", "lm_head"],
        ["backward"],
        ["optimizer_step"],
    ]
    return t


def llama_layer(t, i, width, kv_width, tokens):
    layer = t.module(f"model.layers.{i}", "LlamaDecoderLayer")
    t.norm(f"{layer}.input_layernorm", width, bias=False, type_="LlamaRMSNorm")
    attn = t.module(f"{layer}.self_attn", "LlamaAttention")
    for proj, out_features in (("q_proj", width), ("k_proj", kv_width), ("v_proj", kv_width)):
        t.linear(f"{attn}.{proj}", out_features, width)
    t.linear(f"{attn}.o_proj", width, width)
    t.norm(f"{layer}.post_attention_layernorm", width, bias=False, type_="LlamaRMSNorm")
    hidden, kv = tokens * width * BF16, tokens * kv_width * BF16
    t.events += [
        enter(layer, output_bytes=hidden),
        call(f"{layer}.input_layernorm", None, hidden, hidden),
        enter(attn, quadratic(4 * tokens * tokens * width), hidden, hidden),
        call(f"{attn}.q_proj", None, hidden, hidden),
        call(f"{attn}.k_proj", None, kv, kv),
        call(f"{attn}.v_proj", None, kv, kv),
        call(f"{attn}.o_proj", None, hidden, hidden),
        ["exit", attn],
        call(f"{layer}.post_attention_layernorm", None, hidden, hidden),
    ]
    return layer


def llama_frame(t, vocab, width, tokens, body):
    t.module("model", "LlamaModel")
    t.module("model.embed_tokens", "Embedding")
    t.param("model.embed_tokens", "weight", [vocab, width])
    t.module("model.layers", "ModuleList")
    hidden, logits = tokens * width * BF16, tokens * vocab * BF16
    t.events.append(enter("model", output_bytes=hidden))
    t.events.append(call("model.embed_tokens", None, hidden, hidden))
    body()
    t.norm("model.norm", width, bias=False, type_="LlamaRMSNorm")
    t.linear("lm_head", vocab, width)
    t.events += [call("model.norm", None, hidden, hidden), ["exit", "model"],
                 call("lm_head", None, logits, logits), ["backward"], ["optimizer_step"]]


def llama2_7b():
    width, layers, ffn, vocab, tokens = 4096, 32, 11008, 32000, 4096
    t = TraceBuilder("llama-2-7b", "LlamaForCausalLM", tokens,
                     "Llama-2-7B shapes (Touvron et al. 2023, Table 1 / HF config): 32 layers, width 4096, 32 heads, "
                     "MLP 11008, vocab 32000, untied LM head; one sequence of 4096 tokens per micro-step")

    def body():
        for i in range(layers):
            layer = llama_layer(t, i, width, width, tokens)
            mlp = t.module(f"{layer}.mlp", "LlamaMLP")
            t.linear(f"{mlp}.gate_proj", ffn, width)
            t.linear(f"{mlp}.up_proj", ffn, width)
            t.linear(f"{mlp}.down_proj", width, ffn)
            hidden, inner = tokens * width * BF16, tokens * ffn * BF16
            t.events += [enter(mlp, output_bytes=hidden), call(f"{mlp}.gate_proj", None, inner, inner),
                         call(f"{mlp}.up_proj", None, inner, inner),
                         call(f"{mlp}.down_proj", None, hidden, hidden), ["exit", mlp], ["exit", layer]]

    llama_frame(t, vocab, width, tokens, body)
    return t


def mixtral_8x7b(ranks=2, seed=7):
    width, layers, ffn, vocab, experts, tokens = 4096, 32, 14336, 32000, 8, 4
    t = TraceBuilder("mixtral-8x7b", "MixtralForCausalLM", tokens,
                     "Mixtral-8x7B shapes (Jiang et al. 2024 / HF config): 32 layers, width 4096, 32 heads with 8 KV "
                     "heads, 8 experts of MLP 14336 with top-2 routing, vocab 32000. 4 tokens per rank and micro-step (a decode-sized batch), "
                     "routed with a seeded random top-2 choice per token, so ranks call different experts, as small "
                     "batches do; an expert with no token is not called (HF's loop skips it). The routing is the recorded tokens', so the "
                     "trace does not rescale to another batch", world=ranks, one_sequence=False)
    rng = random.Random(seed)

    def body():
        for i in range(layers):
            layer = llama_layer(t, i, width, width // 4, tokens)
            moe = t.module(f"{layer}.block_sparse_moe", "MixtralSparseMoeBlock")
            t.linear(f"{moe}.gate", experts, width)
            t.module(f"{moe}.experts", "ModuleList")
            for e in range(experts):
                expert = t.module(f"{moe}.experts.{e}", "MixtralBlockSparseTop2MLP")
                t.linear(f"{expert}.w1", ffn, width)
                t.linear(f"{expert}.w2", width, ffn)
                t.linear(f"{expert}.w3", ffn, width)
            router_logits = tokens * experts * BF16
            # HF's block returns the mixed hidden states and the router logits.
            t.events += [enter(moe, output_bytes=tokens * width * BF16 + router_logits),
                         call(f"{moe}.gate", None, router_logits, router_logits)]
            per_rank = []
            for _ in range(ranks):
                routed = [0] * experts
                for _ in range(tokens):
                    for e in rng.sample(range(experts), 2):
                        routed[e] += 1
                events = []
                for e in range(experts):
                    n = routed[e]
                    if n == 0:
                        continue
                    expert = f"{moe}.experts.{e}"
                    # Flops and outputs for the n tokens routed here; their few activation bytes are left out.
                    flops, hidden, inner = 2 * n * ffn * width, n * width * BF16, n * ffn * BF16
                    events += [enter(expert, output_bytes=hidden), call(f"{expert}.w1", flops, output_bytes=inner),
                               call(f"{expert}.w3", flops, output_bytes=inner),
                               call(f"{expert}.w2", flops, output_bytes=hidden), ["exit", expert]]
                per_rank.append(events)
            t.events += [{"per_rank": per_rank}, ["exit", moe], ["exit", layer]]

    llama_frame(t, vocab, width, tokens, body)
    return t


def t5_stack(t, stack, layers, width, heads, ffn, tokens, decoder):
    t.module(stack, "T5Stack")
    t.module(f"{stack}.block", "ModuleList")
    hidden, inner = tokens * width * BF16, tokens * ffn * BF16
    # embed_tokens is the shared module
    t.events += [enter(stack, output_bytes=hidden), ["param", stack, "shared.weight"]]
    for i in range(layers):
        block = t.module(f"{stack}.block.{i}", "T5Block")
        t.module(f"{block}.layer", "ModuleList")
        t.events.append(enter(block, output_bytes=hidden))
        sublayers = [("T5LayerSelfAttention", "SelfAttention")]
        if decoder:
            sublayers.append(("T5LayerCrossAttention", "EncDecAttention"))
        for index, (layer_type, attention_name) in enumerate(sublayers):
            sub = t.module(f"{block}.layer.{index}", layer_type)
            attention = t.module(f"{sub}.{attention_name}", "T5Attention")
            for proj in ("q", "k", "v", "o"):
                t.linear(f"{attention}.{proj}", width, width)
            if i == 0 and attention_name == "SelfAttention":
                t.module(f"{attention}.relative_attention_bias", "Embedding")
                t.param(f"{attention}.relative_attention_bias", "weight", [32, heads])
            t.norm(f"{sub}.layer_norm", width, bias=False, type_="T5LayerNorm")
            t.events += [enter(sub, output_bytes=hidden), call(f"{sub}.layer_norm", None, hidden, hidden),
                         enter(attention, quadratic(4 * tokens * tokens * width), hidden, hidden)]
            t.events += [call(f"{attention}.{proj}", None, hidden, hidden) for proj in ("q", "k", "v", "o")]
            if i == 0 and attention_name == "SelfAttention":
                # Its output, the [seq_len, seq_len, heads] position bias, grows with seq_len^2, which
                # output_bytes (one figure that grows with tokens) cannot say: left unsaid.
                t.events.append(call(f"{attention}.relative_attention_bias", None, quadratic(tokens * tokens * heads * BF16)))
            t.events += [["exit", attention], ["exit", sub]]
        ff = t.module(f"{block}.layer.{len(sublayers)}", "T5LayerFF")
        dense = t.module(f"{ff}.DenseReluDense", "T5DenseActDense")
        t.linear(f"{dense}.wi", ffn, width)
        t.linear(f"{dense}.wo", width, ffn)
        t.norm(f"{ff}.layer_norm", width, bias=False, type_="T5LayerNorm")
        t.events += [enter(ff, output_bytes=hidden), call(f"{ff}.layer_norm", None, hidden, hidden),
                     enter(dense, output_bytes=hidden),
                     call(f"{dense}.wi", None, inner, inner), call(f"{dense}.wo", None, hidden, hidden),
                     ["exit", dense], ["exit", ff], ["exit", block]]
    t.norm(f"{stack}.final_layer_norm", width, bias=False, type_="T5LayerNorm")
    t.events += [call(f"{stack}.final_layer_norm", None, hidden, hidden), ["exit", stack]]


def t5_base():
    width, layers, heads, ffn, vocab, tokens = 768, 12, 12, 3072, 32128, 512
    t = TraceBuilder("t5-base", "T5ForConditionalGeneration", tokens,
                     "T5-base shapes (Raffel et al. 2020 / HF t5-base config): 12+12 layers, width 768, 12 heads, "
                     "FF 3072, vocab 32128. One embedding `shared` is used by the encoder, the decoder and the tied "
                     "LM head: each uses shared.weight through the checked accessor (external parameters). "
                     "512 encoder and 512 decoder tokens per micro-step")
    t.module("shared", "Embedding")
    t.param("shared", "weight", [vocab, width])
    t5_stack(t, "encoder", layers, width, heads, ffn, tokens, decoder=False)
    t5_stack(t, "decoder", layers, width, heads, ffn, tokens, decoder=True)
    t.module("lm_head", "TiedLinear")
    logits = tokens * vocab * BF16
    t.events += [enter("lm_head", 2 * tokens * vocab * width, logits, logits),
                 ["param", "lm_head", "shared.weight"], ["exit", "lm_head"], ["backward"], ["optimizer_step"]]
    return t


def fp_quant_like():
    width, layers, ffn, vocab, tokens, group = 2048, 4, 5632, 32000, 2048, 32
    t = TraceBuilder("fp-quant-like", "QuantizedForCausalLM", tokens,
                     "A small Llama-shaped model whose linear layers are quantized in the style of the FP-Quant "
                     "integration: each keeps a zero-element `weight` placeholder next to its packed 4-bit `qweight` "
                     "(two per byte), per-group `scales` (group 32) and a one-element `global_scale`, so every layer "
                     "mixes sized, zero-sized and smaller-than-W parameters (SCENARIOS.md #1 and #2). Flops are "
                     "given explicitly: the weight shapes do not say the GEMM size")

    def quant_linear(name, out_features, in_features):
        t.module(name, "FPQuantLinear")
        t.param(name, "weight", [0])
        t.param(name, "qweight", [out_features, in_features // 2], dtype="u8")
        t.param(name, "scales", [out_features, in_features // group], dtype="fp8")
        t.param(name, "global_scale", [1], dtype="f32")
        out = tokens * out_features * BF16
        return call(name, 2 * tokens * out_features * in_features, out, out)

    t.module("model", "LlamaModel")
    t.module("model.embed_tokens", "Embedding")
    t.param("model.embed_tokens", "weight", [vocab, width])
    t.module("model.layers", "ModuleList")
    hidden, logits = tokens * width * BF16, tokens * vocab * BF16
    t.events += [enter("model", output_bytes=hidden), call("model.embed_tokens", None, hidden, hidden)]
    for i in range(layers):
        layer = t.module(f"model.layers.{i}", "LlamaDecoderLayer")
        attn = t.module(f"{layer}.self_attn", "LlamaAttention")
        mlp = t.module(f"{layer}.mlp", "LlamaMLP")
        t.norm(f"{layer}.input_layernorm", width, bias=False, type_="LlamaRMSNorm")
        t.events += [enter(layer, output_bytes=hidden), call(f"{layer}.input_layernorm", None, hidden, hidden),
                     enter(attn, quadratic(4 * tokens * tokens * width), hidden, hidden)]
        t.events += [quant_linear(f"{attn}.{p}", width, width) for p in ("q_proj", "k_proj", "v_proj", "o_proj")]
        t.events += [["exit", attn], enter(mlp, output_bytes=hidden)]
        t.events += [quant_linear(f"{mlp}.gate_proj", ffn, width), quant_linear(f"{mlp}.up_proj", ffn, width),
                     quant_linear(f"{mlp}.down_proj", width, ffn)]
        t.events += [["exit", mlp], ["exit", layer]]
    t.norm("model.norm", width, bias=False, type_="LlamaRMSNorm")
    t.linear("lm_head", vocab, width)
    t.events += [call("model.norm", None, hidden, hidden), ["exit", "model"],
                 call("lm_head", None, logits, logits), ["backward"], ["optimizer_step"]]
    return t


def all_traces():
    return {
        "gpt2-124m.json": gpt("gpt2-124m", 12, 768, 12, 50257, 1024,
                              "GPT-2 small (Radford et al. 2019): 12 layers, width 768, 12 heads, vocab 50257, "
                              "context 1024, LM head tied to wte; one sequence of 1024 tokens per micro-step"),
        "gpt3-175b.json": gpt("gpt3-175b", 96, 12288, 96, 50257, 2048,
                              "GPT-3 175B (Brown et al. 2020, Table 2.1): 96 layers, width 12288, 96 heads, "
                              "context 2048, GPT-2 vocab 50257, LM head tied to wte; one sequence of 2048 tokens "
                              "per micro-step"),
        "zero-paper-7.5b.json": gpt("zero-paper-7.5b", 36, 4096, 32, 50257, 1024,
                                    "A GPT-shaped 7.46B model (36 layers, width 4096) standing for the ZeRO paper's "
                                    "7.5B example (Rajbhandari et al. 2020, Figure 1: 1.9 GB of model states per "
                                    "device with stage 3 at 64 ranks)"),
        "llama-2-7b.json": llama2_7b(),
        "mixtral-8x7b.json": mixtral_8x7b(),
        "t5-base.json": t5_base(),
        "fp-quant-like.json": fp_quant_like(),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", metavar="DIR", help="compare with the traces in DIR instead of writing")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "traces", "models"))
    args = parser.parse_args()
    traces = {name: builder.text() for name, builder in all_traces().items()}
    if args.check:
        stale = [name for name, text in traces.items()
                 if not os.path.exists(os.path.join(args.check, name))
                 or open(os.path.join(args.check, name)).read() != text]
        if stale:
            print("out of date (run tools/make_model_traces.py): " + ", ".join(sorted(stale)), file=sys.stderr)
            return 1
        print(f"{len(traces)} traces in {args.check} match the generator")
        return 0
    os.makedirs(args.out, exist_ok=True)
    total = 0
    for name, text in sorted(traces.items()):
        with open(os.path.join(args.out, name), "w") as out:
            out.write(text)
        total += len(text)
        print(f"{name}: {len(text) / 1024:.0f} KiB")
    print(f"total {total / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
