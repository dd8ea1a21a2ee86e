#!/usr/bin/python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Plain PyTorch reference forwards (double precision) of the Hugging Face architectures KVLens's
transformer engine (core/lm) runs, and a minimal safetensors writer and reader.

Written from the architectures' definitions, not from `transformers` (Debian has no package for it):
  * Llama / Mistral / Qwen2: RMSNorm (x / sqrt(mean(x^2) + eps) * w), rotate-half RoPE
    (dimension i paired with i + head_dim/2, inv_freq_i = theta^(-2i/head_dim)), grouped-query
    attention (query head h reads KV head h // (heads / kv_heads)), SwiGLU MLP
    down(silu(gate(x)) * up(x)), optional q/k/v biases, untied or tied lm_head;
  * GPT-2: learned positions, LayerNorm, fused c_attn (Conv1D, stored [in, out]), gelu_new
    (the tanh approximation), tied head.
Each forward takes the config dict as config.json holds it and a dict of float64 torch tensors
named as the checkpoint names them, and returns logits [T x vocab] for one causal chunk at
positions 0..T-1.

Used by scripts/make_test_models.py and scripts/train_tiny_llama.py; never at run time or by tests.
"""

import json
import math
import struct

import numpy as np
import torch


# ----------------------------------------------------------------------------- safetensors

def _to_bytes(array, dtype):
    """(bytes, safetensors dtype name) of a float array stored as dtype "F32", "F16" or "BF16"."""
    t = torch.as_tensor(np.ascontiguousarray(array), dtype=torch.float32)
    if dtype == "F32":
        return t.numpy().tobytes(), "F32"
    if dtype == "F16":
        return t.to(torch.float16).numpy().tobytes(), "F16"
    if dtype == "BF16":
        # numpy has no bfloat16: reinterpret torch's bfloat16 storage as int16.
        return t.to(torch.bfloat16).view(torch.int16).numpy().tobytes(), "BF16"
    raise ValueError(f"unsupported dtype {dtype}")


def write_safetensors(path, tensors, dtype="F32", metadata=None):
    """tensors: list of (name, array) written in that order as `dtype`, header padded with spaces
    so the data start 8-byte aligned (as huggingface/safetensors does)."""
    blobs = []
    header = {}
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    offset = 0
    for name, a in tensors:
        data, name_dtype = _to_bytes(a, dtype)
        header[name] = {"dtype": name_dtype, "shape": list(np.shape(a)), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)


def read_safetensors(path):
    """{name: float64 torch tensor} of a file write_safetensors wrote (F32, F16 or BF16)."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        payload = f.read()
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = np.frombuffer(payload[begin:end], dtype={"F32": np.float32, "F16": np.float16, "BF16": np.int16}[entry["dtype"]])
        t = torch.from_numpy(raw.copy())
        if entry["dtype"] == "BF16":
            t = t.view(torch.bfloat16)
        out[name] = t.to(torch.float64).reshape(entry["shape"])
    return out


def write_npy_int64(path, ids):
    np.save(path, np.asarray(ids, dtype=np.int64))


def write_npy_float32(path, array):
    np.save(path, np.ascontiguousarray(np.asarray(array, dtype=np.float32)))


# ----------------------------------------------------------------------------- Llama family

def rms_norm(x, w, eps):
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * w


def rope(x, theta):
    """x: [heads, T, head_dim]; rotate-half pairing, positions 0..T-1, angles in double."""
    heads, t, d = x.shape
    half = d // 2
    inv_freq = torch.tensor([theta ** (-2.0 * i / d) for i in range(half)], dtype=torch.float64)
    angles = torch.arange(t, dtype=torch.float64)[:, None] * inv_freq[None, :]  # [T, half]
    cos, sin = torch.cos(angles), torch.sin(angles)
    a, b = x[..., :half], x[..., half:]
    # (a, b) rotated by the angle: a' = a cos - b sin, b' = b cos + a sin.
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)


def causal_attention(q, k, v):
    """q: [H, T, d]; k, v: [H, T, d] (already expanded to the query heads) -> [H, T, d]."""
    t, d = q.shape[1], q.shape[2]
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def llama_config_values(cfg):
    hidden = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or hidden // heads
    theta = cfg.get("rope_theta")
    if theta is None:
        theta = (cfg.get("rope_parameters") or {}).get("rope_theta", 10000.0)
    return hidden, heads, kv_heads, head_dim, float(theta)


def llama_forward(cfg, w, ids):
    """Logits [T x vocab] (float64) of a LlamaForCausalLM / MistralForCausalLM / Qwen2ForCausalLM."""
    hidden, heads, kv_heads, head_dim, theta = llama_config_values(cfg)
    eps = cfg.get("rms_norm_eps", 1e-6)
    layers = cfg["num_hidden_layers"]
    ids = torch.as_tensor(ids, dtype=torch.long)
    t = ids.shape[0]
    x = w["model.embed_tokens.weight"][ids]

    def linear(h, name):
        out = h @ w[name + ".weight"].T
        if name + ".bias" in w:
            out = out + w[name + ".bias"]
        return out

    for i in range(layers):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = linear(h, p + "self_attn.q_proj").reshape(t, heads, head_dim).transpose(0, 1)
        k = linear(h, p + "self_attn.k_proj").reshape(t, kv_heads, head_dim).transpose(0, 1)
        v = linear(h, p + "self_attn.v_proj").reshape(t, kv_heads, head_dim).transpose(0, 1)
        q, k = rope(q, theta), rope(k, theta)
        group = heads // kv_heads
        k = k.repeat_interleave(group, dim=0)
        v = v.repeat_interleave(group, dim=0)
        a = causal_attention(q, k, v).transpose(0, 1).reshape(t, heads * head_dim)
        x = x + linear(a, p + "self_attn.o_proj")
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = linear(h, p + "mlp.gate_proj")
        x = x + linear(gate * torch.sigmoid(gate) * linear(h, p + "mlp.up_proj"), p + "mlp.down_proj")
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return x @ head.T


# ----------------------------------------------------------------------------- GPT-2

def layer_norm(x, weight, bias, eps):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gpt2_forward(cfg, w, ids, prefix=""):
    """Logits [T x vocab] (float64) of a GPT2LMHeadModel whose tensors carry `prefix` ("" or "transformer.")."""
    d = cfg["n_embd"]
    heads = cfg["n_head"]
    head_dim = d // heads
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    ids = torch.as_tensor(ids, dtype=torch.long)
    t = ids.shape[0]
    g = lambda name: w[prefix + name]  # noqa: E731
    x = g("wte.weight")[ids] + g("wpe.weight")[:t]
    for i in range(cfg["n_layer"]):
        p = f"h.{i}."
        h = layer_norm(x, g(p + "ln_1.weight"), g(p + "ln_1.bias"), eps)
        qkv = h @ g(p + "attn.c_attn.weight") + g(p + "attn.c_attn.bias")  # Conv1D: [in, out]
        q, k, v = (qkv[:, j * d:(j + 1) * d].reshape(t, heads, head_dim).transpose(0, 1) for j in range(3))
        a = causal_attention(q, k, v).transpose(0, 1).reshape(t, d)
        x = x + a @ g(p + "attn.c_proj.weight") + g(p + "attn.c_proj.bias")
        h = layer_norm(x, g(p + "ln_2.weight"), g(p + "ln_2.bias"), eps)
        m = gelu_tanh(h @ g(p + "mlp.c_fc.weight") + g(p + "mlp.c_fc.bias"))
        x = x + m @ g(p + "mlp.c_proj.weight") + g(p + "mlp.c_proj.bias")
    x = layer_norm(x, g("ln_f.weight"), g("ln_f.bias"), eps)
    return x @ g("wte.weight").T
