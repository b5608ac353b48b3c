#!/usr/bin/env python3
"""Writes traces/models/mixtral-8x7b.json (format: traces/FORMAT.md), the one shipped trace written
by hand rather than recorded: its MoE routing differs by rank, and tools/recorders/record_memory_trace.py
records on fake tensors, which hold no routing values. The dense traces beside it are recorded from
the models' real configs with tools/recorders/record_memory_trace.py (`--shipped traces/models`).

    tools/recorders/make_model_traces.py                 # (re)write traces/models/mixtral-8x7b.json
    tools/recorders/make_model_traces.py --check DIR     # exit 1 if DIR's trace differs from what this writes

Each layer's expert calls are a per-rank group, as small batches route them. Flops of Linear calls
are left out: replay derives them as 2 * tokens * weight elements; experts, which see a subset of
the tokens, get explicit flops. activation_bytes is each leaf module's output kept for backward, in
bf16, at the trace's tokens: a lower bound of what PyTorch keeps (the dense traces' recorder
measures it), which does not matter for what this trace shows (a mismatch naming the expert).
"""
import argparse
import json
import os
import random
import sys

BF16 = 2


class TraceBuilder:
    def __init__(self, name, root_type, tokens, notes, world=None, one_sequence=True):
        self.header = {"zero3_trace": 1, "source": "tools/recorders/make_model_traces.py", "name": name, "dtype": "bf16"}
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


def all_traces():
    return {"mixtral-8x7b.json": mixtral_8x7b()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", metavar="DIR", help="compare with the traces in DIR instead of writing")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "traces", "models"))
    args = parser.parse_args()
    traces = {name: builder.text() for name, builder in all_traces().items()}
    if args.check:
        stale = [name for name, text in traces.items()
                 if not os.path.exists(os.path.join(args.check, name))
                 or open(os.path.join(args.check, name)).read() != text]
        if stale:
            print("out of date (run tools/recorders/make_model_traces.py): " + ", ".join(sorted(stale)), file=sys.stderr)
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
