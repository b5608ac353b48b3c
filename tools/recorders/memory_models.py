"""Plain-PyTorch models for the memory recorder and its oracle (tools/recorders/record_memory_trace.py,
tools/recorders/memory_oracle.py): no transformers needed, and module / parameter names as the shipped traces
(tools/recorders/make_model_traces.py) spell them, so a recorded trace replaces a shipped one name for name.

- gpt(): GPT-2 / GPT-3 in nanoGPT's layout: learned positions, pre-LayerNorm blocks, GELU (tanh),
  fused qkv, LM head tied to wte (`lm_head` is a TiedLinear that owns no weight and uses
  wte.weight: an external parameter), the loss computed in forward on f32 logits (as nanoGPT with
  `.float()`). Names: wte, wpe, h.N (Block), h.N.attn.qkv, h.N.mlp.fc, ln_f, lm_head.
- llama(): Hugging Face's Llama layout and names (model.layers.N: LlamaDecoderLayer, self_attn.q_proj,
  mlp.gate_proj, ...): RMSNorm with HF's f32 copy, SwiGLU, rotary positions computed once by
  model.rotary_emb and passed to every layer, no biases, untied head, loss on f32 logits.
  `quantized=True` makes every projection an FPQuantLinear (fp-quant-like: a zero-element `weight`
  placeholder, packed `qweight`, per-group `scales`, a one-element `global_scale`; forward
  dequantizes into a bf16 weight, then a GEMM).

Attention is "sdpa" (torch's fused scaled_dot_product_attention, causal: keeps no seq_len^2
probabilities) or "eager" (scores and f32 softmax probabilities materialized, as HF's eager path).
Every model's forward is `model(input_ids, labels) -> loss`.

Sizes: CONFIGS below (GPT-2 124M, GPT-3 175B, the ZeRO paper's 7.5B, Llama-2-7B, a 1.3B
Llama-shaped one, small test shapes). Build on FakeTensorMode or the meta device: no memory.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

CONFIGS = {
    # name: (kind, fields)
    "gpt2-124m": ("gpt", dict(layers=12, width=768, heads=12, vocab=50257, context=1024)),
    "gpt3-175b": ("gpt", dict(layers=96, width=12288, heads=96, vocab=50257, context=2048)),
    "zero-paper-7.5b": ("gpt", dict(layers=36, width=4096, heads=32, vocab=50257, context=1024)),
    "llama-2-7b": ("llama", dict(layers=32, width=4096, heads=32, kv_heads=32, ffn=11008, vocab=32000,
                                 context=4096)),
    "llama-1.3b": ("llama", dict(layers=16, width=2048, heads=16, kv_heads=16, ffn=5632, vocab=32000,
                                 context=4096)),
    "fp-quant-like": ("llama", dict(layers=4, width=2048, heads=16, kv_heads=16, ffn=5632, vocab=32000,
                                    context=2048, quantized=True)),
    # Small shapes for the CTest (seconds on 2 cores).
    "gpt2-small-test": ("gpt", dict(layers=4, width=256, heads=4, vocab=8192, context=256)),
    "llama-small-test": ("llama", dict(layers=4, width=256, heads=4, kv_heads=2, ffn=688, vocab=8192,
                                       context=256)),
}


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads, attention):
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.heads = heads
        self.attention = attention

    def forward(self, x):
        batch, seq, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        q, k, v = [t.view(batch, seq, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v)]
        y = attend(q, k, v, self.attention)
        return self.proj(y.transpose(1, 2).reshape(batch, seq, width))


def attend(q, k, v, attention):
    """Causal attention over [batch, heads, seq, head_dim]: fused (sdpa) or HF's eager path (scores,
    f32 softmax, back to the compute dtype)."""
    if attention == "sdpa":
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    seq = q.shape[-2]
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    mask = torch.full((seq, seq), float("-inf"), device=q.device, dtype=scores.dtype).triu(1)
    probs = F.softmax(scores + mask, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(probs, v)


class Mlp(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, 4 * width)
        self.proj = nn.Linear(4 * width, width)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, width, heads, attention):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, attention)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = Mlp(width)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TiedLinear(nn.Module):
    """The LM head tied to the embedding: owns no weight, computes with wte.weight."""

    def __init__(self, embedding):
        super().__init__()
        self.embedding = [embedding]  # a plain list: not a submodule

    def forward(self, x):
        return F.linear(x, self.embedding[0].weight)


class GPT(nn.Module):
    def __init__(self, layers, width, heads, vocab, context, attention="sdpa"):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(context, width)
        self.h = nn.ModuleList(Block(width, heads, attention) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.lm_head = TiedLinear(self.wte)
        self.vocab = vocab

    def forward(self, input_ids, labels):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(positions)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x)).float()
        return F.cross_entropy(logits.view(-1, self.vocab), labels.view(-1))


class LlamaRMSNorm(nn.Module):
    """Hugging Face's: the input upcast to f32, normalized, cast back, times the weight."""

    def __init__(self, width, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        return self.weight * hidden_states.to(input_dtype)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, head_dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, position_ids):
        freqs = (self.inv_freq[None, :, None].float() @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class FPQuantLinear(nn.Module):
    """fp-quant-like: `weight` is a zero-element placeholder; `qweight` holds two 4-bit values per byte
    (kept here in the compute dtype so that it can be a trainable parameter of the right shape; the
    trace says u8), `scales` one per group of 32 inputs (fp8 in the trace), `global_scale` one
    element. Forward dequantizes into a [out, in] weight in the compute dtype, then a GEMM."""

    def __init__(self, in_features, out_features, group=32):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(0))
        self.qweight = nn.Parameter(torch.empty(out_features, in_features // 2))
        self.scales = nn.Parameter(torch.empty(out_features, in_features // group))
        self.global_scale = nn.Parameter(torch.ones(1, dtype=torch.float32))
        self.group = group

    def forward(self, x):
        weight = (self.qweight.repeat_interleave(2, dim=1)
                  * self.scales.repeat_interleave(self.group, dim=1)
                  * self.global_scale.to(x.dtype))
        return F.linear(x, weight)


def projection(in_features, out_features, quantized):
    return FPQuantLinear(in_features, out_features) if quantized else nn.Linear(in_features, out_features, bias=False)


class LlamaAttention(nn.Module):
    def __init__(self, width, heads, kv_heads, attention, quantized):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, width // heads
        self.q_proj = projection(width, width, quantized)
        self.k_proj = projection(width, kv_heads * self.head_dim, quantized)
        self.v_proj = projection(width, kv_heads * self.head_dim, quantized)
        self.o_proj = projection(width, width, quantized)
        self.attention = attention

    def forward(self, hidden_states, position_embeddings):
        batch, seq, width = hidden_states.shape
        q = self.q_proj(hidden_states).view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = position_embeddings
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if self.kv_heads != self.heads:  # HF's repeat_kv
            repeat = self.heads // self.kv_heads
            k = k[:, :, None].expand(batch, self.kv_heads, repeat, seq, self.head_dim).reshape(
                batch, self.heads, seq, self.head_dim)
            v = v[:, :, None].expand(batch, self.kv_heads, repeat, seq, self.head_dim).reshape(
                batch, self.heads, seq, self.head_dim)
        y = attend(q, k, v, self.attention)
        return self.o_proj(y.transpose(1, 2).reshape(batch, seq, width))


class LlamaMLP(nn.Module):
    def __init__(self, width, ffn, quantized):
        super().__init__()
        self.gate_proj = projection(width, ffn, quantized)
        self.up_proj = projection(width, ffn, quantized)
        self.down_proj = projection(ffn, width, quantized)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, width, heads, kv_heads, ffn, attention, quantized):
        super().__init__()
        self.input_layernorm = LlamaRMSNorm(width)
        self.self_attn = LlamaAttention(width, heads, kv_heads, attention, quantized)
        self.post_attention_layernorm = LlamaRMSNorm(width)
        self.mlp = LlamaMLP(width, ffn, quantized)

    def forward(self, hidden_states, position_embeddings):
        hidden_states = hidden_states + self.self_attn(self.input_layernorm(hidden_states), position_embeddings)
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))


class LlamaModel(nn.Module):
    def __init__(self, layers, width, heads, kv_heads, ffn, vocab, attention, quantized):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList(LlamaDecoderLayer(width, heads, kv_heads, ffn, attention, quantized)
                                    for _ in range(layers))
        self.norm = LlamaRMSNorm(width)
        self.rotary_emb = LlamaRotaryEmbedding(width // heads)

    def forward(self, input_ids):
        hidden_states = self.embed_tokens(input_ids)
        position_ids = torch.arange(input_ids.shape[1], device=input_ids.device)[None]
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for layer in self.layers:
            hidden_states = layer(hidden_states, position_embeddings)
        return self.norm(hidden_states)


class LlamaForCausalLM(nn.Module):
    def __init__(self, layers, width, heads, kv_heads, ffn, vocab, context, attention="sdpa", quantized=False):
        super().__init__()
        self.model = LlamaModel(layers, width, heads, kv_heads, ffn, vocab, attention, quantized)
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.vocab = vocab

    def forward(self, input_ids, labels):
        logits = self.lm_head(self.model(input_ids)).float()
        return F.cross_entropy(logits.view(-1, self.vocab), labels.view(-1))


ROOT_TYPES = {"gpt": GPT, "llama": LlamaForCausalLM}
# The module types that `--checkpoint-activations` names for each kind (one per layer).
LAYER_TYPES = {"gpt": "Block", "llama": "LlamaDecoderLayer"}


def build(name, attention="sdpa", dtype=torch.bfloat16, **overrides):
    """The model CONFIGS[name] (with `overrides` of its fields) in `dtype`, built under whatever
    mode or device context is active (FakeTensorMode: no memory). Returns (model, kind, fields)."""
    kind, fields = CONFIGS[name]
    fields = dict(fields, **overrides)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        model = ROOT_TYPES[kind](attention=attention, **fields)
    finally:
        torch.set_default_dtype(previous)
    model.train()
    return model, kind, fields
