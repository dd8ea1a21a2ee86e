#!/usr/bin/python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Train KVLens's first example model (no longer shipped) and capture its KV cache.

Historical: resources/examples/tiny_lm_kv.safetensors is now the dump of the shipped model
resources/models/tiny-llama (scripts/train_tiny_llama.py), written by `kvlens capture`; this script
writes to /tmp/tiny_lm_kv.safetensors by default so it never replaces it.

A small causal transformer (4 layers x 4 heads x head_dim 64, d_model 256, RoPE, byte-level
vocabulary of 256) is trained on the licence texts Debian installs in /usr/share/common-licenses
(every regular file but Apache-2.0, which is held out), on the CPU, with fixed seeds and
deterministic kernels. Then Q, K (both after RoPE) and V of every layer and head are captured by
scripts/capture_kv.py on the first 512 bytes of the held-out Apache-2.0 text and written to
resources/examples/tiny_lm_kv.safetensors (F16), with the model card in its metadata and on stdout.

  /usr/bin/python3 scripts/train_tiny_lm.py [--steps 800] [--out /tmp/tiny_lm_kv.safetensors]

Needs Debian's python3-torch and a fast BLAS (apt install python3-torch libblis4-pthread: with the
reference BLAS Debian installs by default, torch's products run at 2 GFLOP/s and training takes
hours). Run it with Debian's interpreter, /usr/bin/python3. CI does not run it: it uses the
shipped file.
"""

import argparse
import math
import os
import sys
import time

# One thread for BLAS and one for torch: deterministic, and on 2 cores two pools of 2 threads
# oversubscribe (a step took 10x longer).
os.environ.setdefault("BLIS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capture_kv  # noqa: E402

LICENSES = "/usr/share/common-licenses"
HELD_OUT = "Apache-2.0"


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    """The Hugging Face Llama form (rotate-half), so capture_kv records it the same way."""
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class Attention(nn.Module):
    def __init__(self, d_model, heads, context):
        super().__init__()
        self.heads, self.head_dim = heads, d_model // heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.o_proj = nn.Linear(d_model, d_model, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        angles = torch.outer(torch.arange(context).float(), inv)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos()[None, None], persistent=False)
        self.register_buffer("sin", angles.sin()[None, None], persistent=False)
        self.register_buffer("mask", torch.ones(context, context, dtype=torch.bool).tril()[None, None],
                             persistent=False)

    def forward(self, x):
        b, t, _ = x.shape
        shape = (b, t, self.heads, self.head_dim)
        q = self.q_proj(x).view(shape).transpose(1, 2)
        k = self.k_proj(x).view(shape).transpose(1, 2)
        v = self.v_proj(x).view(shape).transpose(1, 2)
        q, k = sys.modules[__name__].apply_rotary_pos_emb(q, k, self.cos[:, :, :t], self.sin[:, :, :t])
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~self.mask[:, :, :t, :t], float("-inf"))
        out = scores.softmax(dim=-1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


class Block(nn.Module):
    def __init__(self, d_model, heads, context):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.self_attn = Attention(d_model, heads, context)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.self_attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    def __init__(self, layers=4, heads=4, d_model=256, context=512):
        super().__init__()
        self.embed = nn.Embedding(256, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, context) for _ in range(layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, 256, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def corpus():
    train, held = [], None
    for name in sorted(os.listdir(LICENSES)):
        path = os.path.join(LICENSES, name)
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        data = open(path, "rb").read()
        if name == HELD_OUT:
            held = data
        else:
            train.append(data)
    if held is None:
        raise SystemExit(f"{LICENSES}/{HELD_OUT} is missing (package base-files)")
    return b"\n\n".join(train), held


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--capture-tokens", type=int, default=512)
    parser.add_argument("--out", default="/tmp/tiny_lm_kv.safetensors")
    args = parser.parse_args()

    torch.manual_seed(20261201)
    np.random.seed(20261201)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    train, held = corpus()
    data = torch.tensor(np.frombuffer(train, dtype=np.uint8).astype(np.int64))
    model = TinyLM(context=args.context)
    params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01, betas=(0.9, 0.95))
    warmup = max(1, args.steps // 20)  # linear warm-up, then cosine decay to a tenth
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) * (0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, s / args.steps)))))
    generator = torch.Generator().manual_seed(1)
    start = time.time()
    loss_value = float("nan")
    for step in range(args.steps):
        offsets = torch.randint(0, len(data) - args.context - 1, (args.batch,), generator=generator)
        batch = torch.stack([data[o: o + args.context + 1] for o in offsets])
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 256), batch[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        loss_value = 0.98 * loss_value + 0.02 * loss.item() if step else loss.item()
        if step % 100 == 0 or step == args.steps - 1:
            print(f"step {step:5d}  loss {loss_value:.3f} nats/byte  {time.time() - start:6.0f} s", flush=True)

    model.eval()
    ids = torch.tensor(np.frombuffer(held[: args.capture_tokens], dtype=np.uint8).astype(np.int64))[None]
    with torch.no_grad():
        held_loss = F.cross_entropy(model(ids)[0, :-1], ids[0, 1:]).item()
    layers = capture_kv.capture(model, ids, rope_modules=[sys.modules[__name__]])
    card = {
        "model": "kvlens-tiny-lm (4 layers x 4 heads x head_dim 64, d_model 256, RoPE, bytes)",
        "parameters": str(params),
        "corpus": f"{LICENSES} (every file but {HELD_OUT}), {len(train)} bytes",
        "steps": str(args.steps),
        "batch": f"{args.batch} x {args.context} bytes",
        "final_train_loss": f"{loss_value:.3f} nats/byte (running mean)",
        "held_out_loss": f"{held_loss:.3f} nats/byte on the captured text",
        "rope": "post",
        "positions": f"0..{ids.shape[1] - 1}",
        "source": f"{LICENSES}/{HELD_OUT}, bytes 0..{ids.shape[1] - 1} (held out)",
        "seed": "20261201",
        "training_seconds": f"{time.time() - start:.0f}",
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    capture_kv.write_dump(args.out, layers, card)
    # Round trip: what was written is what was captured (to F16 precision).
    meta, tensors = capture_kv.read_dump(args.out)
    for index, kinds in enumerate(layers):
        for kind, a in kinds.items():
            back = tensors[f"layers.{index}.{kind}"]
            if not np.allclose(back, a.float().numpy(), rtol=2e-3, atol=2e-3):
                raise SystemExit(f"round trip failed for layers.{index}.{kind}")
    print("model card:")
    for key, value in meta.items():
        print(f"  {key}: {value}")
    print(f"wrote {os.path.abspath(args.out)} ({os.path.getsize(args.out)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
