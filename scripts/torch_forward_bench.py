#!/usr/bin/python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""The same forwards kvlens-lm-bench times, in PyTorch on this machine: the side-by-side the model
runner's speed is reported against (README, "Speed of the model runner").

    scripts/torch_forward_bench.py [--threads 2]

Times, as medians of 5 after one warm-up, in float32 under torch.no_grad() with `threads` intra-op
threads (kvlens-lm-bench's default is every core; pass the same count to both):
  * a GPT-2-small-shaped model (12 layers, 768 wide, 12 heads, MLP 3072, vocab 50257) with uniform
    random weights, one 512-token causal chunk, all logits and the second half's logits;
  * the shipped tiny Llama (resources/models/tiny-llama), 512 bytes of its heldout.txt.
The architectures are written out here (float32 throughout, the RoPE angles included) rather than
taken from scripts/lm_reference.py, whose forwards compute the angles in double for reference logits.
Needs Debian's python3-torch; never used by the test suite.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lm_reference import read_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def causal_attention(q, k, v):
    t, d = q.shape[1], q.shape[2]
    scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(d))
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def gpt2_forward(w, cfg, ids, logits_start=0):
    d, heads = cfg["n_embd"], cfg["n_head"]
    hd = d // heads
    t = ids.shape[0]
    x = w["wte"][ids] + w["wpe"][:t]
    for layer in w["layers"]:
        h = torch.nn.functional.layer_norm(x, (d,), layer["ln1w"], layer["ln1b"], 1e-5)
        qkv = torch.addmm(layer["attn_b"], h, layer["attn_w"])
        q, k, v = (qkv[:, j * d:(j + 1) * d].reshape(t, heads, hd).transpose(0, 1) for j in range(3))
        a = causal_attention(q, k, v).transpose(0, 1).reshape(t, d)
        x = x + torch.addmm(layer["proj_b"], a, layer["proj_w"])
        h = torch.nn.functional.layer_norm(x, (d,), layer["ln2w"], layer["ln2b"], 1e-5)
        m = torch.nn.functional.gelu(torch.addmm(layer["fc_b"], h, layer["fc_w"]), approximate="tanh")
        x = x + torch.addmm(layer["mp_b"], m, layer["mp_w"])
    x = torch.nn.functional.layer_norm(x[logits_start:], (d,), w["lnfw"], w["lnfb"], 1e-5)
    return x @ w["wte"].T


def random_gpt2(seed=1):
    g = torch.Generator().manual_seed(seed)
    cfg = {"n_embd": 768, "n_head": 12, "n_layer": 12, "vocab": 50257, "positions": 1024, "inner": 3072}
    d, inner = cfg["n_embd"], cfg["inner"]

    def u(*shape, scale=0.05, offset=0.0):
        return (torch.rand(*shape, generator=g) * 2 - 1) * scale + offset

    w = {"wte": u(cfg["vocab"], d), "wpe": u(cfg["positions"], d), "lnfw": u(d, scale=0.1, offset=1.0),
         "lnfb": u(d, scale=0.1), "layers": []}
    for _ in range(cfg["n_layer"]):
        w["layers"].append({
            "ln1w": u(d, scale=0.1, offset=1.0), "ln1b": u(d, scale=0.1),
            "attn_w": u(d, 3 * d), "attn_b": u(3 * d),
            "proj_w": u(d, d), "proj_b": u(d),
            "ln2w": u(d, scale=0.1, offset=1.0), "ln2b": u(d, scale=0.1),
            "fc_w": u(d, inner), "fc_b": u(inner),
            "mp_w": u(inner, d), "mp_b": u(d),
        })
    return cfg, w


def rope_tables(t, hd, theta):
    half = hd // 2
    inv = theta ** (-2.0 * torch.arange(half, dtype=torch.float32) / hd)
    ang = torch.arange(t, dtype=torch.float32)[:, None] * inv[None, :]
    return torch.cos(ang), torch.sin(ang)


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)


def llama_forward(cfg, w, ids, logits_start=0):
    hidden, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads") or heads
    hd = cfg.get("head_dim") or hidden // heads
    theta = float(cfg.get("rope_theta") or (cfg.get("rope_parameters") or {}).get("rope_theta", 10000.0))
    eps = cfg.get("rms_norm_eps", 1e-6)
    t = ids.shape[0]
    cos, sin = rope_tables(t, hd, theta)

    def rms(x, weight):
        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps) * weight

    x = w["model.embed_tokens.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms(x, w[p + "input_layernorm.weight"])
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(t, heads, hd).transpose(0, 1)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(t, kv, hd).transpose(0, 1)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(t, kv, hd).transpose(0, 1)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        k = k.repeat_interleave(heads // kv, dim=0)
        v = v.repeat_interleave(heads // kv, dim=0)
        a = causal_attention(q, k, v).transpose(0, 1).reshape(t, heads * hd)
        x = x + a @ w[p + "self_attn.o_proj.weight"].T
        h = rms(x, w[p + "post_attention_layernorm.weight"])
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
    x = rms(x[logits_start:], w["model.norm.weight"])
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return x @ head.T


def median_ms(fn, reps=5):
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32, medians of 5 after a warm-up")
    with torch.no_grad():
        cfg, w = random_gpt2()
        ids = torch.randint(0, cfg["vocab"], (512,), generator=torch.Generator().manual_seed(2))
        for label, start in (("512 tokens, all logits", 0), ("512 tokens, logits of the second half", 256)):
            ms = median_ms(lambda: gpt2_forward(w, cfg, ids, start))
            print(f"  GPT-2-small-shaped  {label:40s} {ms:8.1f} ms {512 / ms * 1000:8.0f} tokens/s")
        model = os.path.join(ROOT, "resources", "models", "tiny-llama")
        with open(os.path.join(model, "config.json")) as f:
            lcfg = json.load(f)
        lw = {k: torch.as_tensor(v).float() for k, v in read_safetensors(os.path.join(model, "model.safetensors")).items()}
        with open(os.path.join(model, "heldout.txt"), "rb") as f:
            text = f.read(512)
        ids = torch.tensor(list(text), dtype=torch.long)
        ms = median_ms(lambda: llama_forward(lcfg, lw, ids))
        print(f"  tiny-llama          {'512 bytes of heldout.txt, all logits':40s} {ms:8.1f} ms {512 / ms * 1000:8.0f} tokens/s")


if __name__ == "__main__":
    main()
