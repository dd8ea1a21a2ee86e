#!/usr/bin/python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write a random-weight Hugging Face Llama folder of a real model's shape, for benchmarks and the
closing checks of kvlens eval at size (never for the test suite: the folders are gigabytes).

  /usr/bin/python3 scripts/make_large_model.py --shape tinyllama --dtype bf16 --out /tmp/tinyllama-bf16
  /usr/bin/python3 scripts/make_large_model.py --shape llama2-7b --dtype bf16 --out /tmp/llama2-7b-bf16

Shapes (Llama architecture, vocabulary 32000, RoPE theta 10000):
  tinyllama   22 layers, hidden 2048, 32 heads x 64 (4 KV heads), MLP 5632   (1.10 B parameters)
  llama2-7b   32 layers, hidden 4096, 32 heads x 128 (32 KV heads), MLP 11008 (6.74 B parameters)
  small       4 layers, hidden 512, 8 heads x 64 (2 KV heads), MLP 1376       (for trying the script)

The folder gets config.json, model.safetensors (one file; BF16, F16 or F32) and tokens.npy (int32
random ids, --tokens of them) to evaluate with `kvlens eval --tokens`. Weights are N(0, s^2) with
s = 0.02 (norms 1), drawn once into a pool of 2^24 values and tiled at random offsets, so writing
13.5 GB takes about as long as the disk does. A random model predicts nothing: its PPL is about the
vocabulary's size; the point is speed and memory at the real shape.
"""

import argparse
import json
import os
import struct

import numpy as np

SHAPES = {
    "tinyllama": dict(layers=22, hidden=2048, heads=32, kv_heads=4, intermediate=5632, vocab=32000, context=2048),
    "llama2-7b": dict(layers=32, hidden=4096, heads=32, kv_heads=32, intermediate=11008, vocab=32000, context=4096),
    "small": dict(layers=4, hidden=512, heads=8, kv_heads=2, intermediate=1376, vocab=32000, context=2048),
}

DTYPES = {"bf16": ("BF16", 2), "f16": ("F16", 2), "f32": ("F32", 4)}


def tensors(shape):
    """(name, [rows, cols] or [n], is_norm) in the order Hugging Face writes them."""
    h, hd = shape["hidden"], shape["hidden"] // shape["heads"]
    q, kv, inter = shape["heads"] * hd, shape["kv_heads"] * hd, shape["intermediate"]
    out = [("model.embed_tokens.weight", [shape["vocab"], h], False)]
    for i in range(shape["layers"]):
        p = f"model.layers.{i}."
        out += [
            (p + "input_layernorm.weight", [h], True),
            (p + "self_attn.q_proj.weight", [q, h], False),
            (p + "self_attn.k_proj.weight", [kv, h], False),
            (p + "self_attn.v_proj.weight", [kv, h], False),
            (p + "self_attn.o_proj.weight", [h, q], False),
            (p + "post_attention_layernorm.weight", [h], True),
            (p + "mlp.gate_proj.weight", [inter, h], False),
            (p + "mlp.up_proj.weight", [inter, h], False),
            (p + "mlp.down_proj.weight", [h, inter], False),
        ]
    out += [("model.norm.weight", [h], True), ("lm_head.weight", [shape["vocab"], h], False)]
    return out


def encode(values, dtype):
    """float32 values as the stored dtype's little-endian bytes (BF16: round to nearest even)."""
    if dtype == "f32":
        return values.astype("<f4").tobytes()
    if dtype == "f16":
        return values.astype("<f2").tobytes()
    bits = values.astype(np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2").tobytes()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tinyllama")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    ap.add_argument("--tokens", type=int, default=32 * 1024)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    shape = SHAPES[args.shape]
    name, size = DTYPES[args.dtype]
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    pool = encode(rng.standard_normal(1 << 24, dtype=np.float32) * 0.02, args.dtype)
    ones = encode(np.ones(shape["hidden"], dtype=np.float32), args.dtype)

    header, offset = {}, 0
    plan = tensors(shape)
    for tname, tshape, _ in plan:
        n = int(np.prod(tshape)) * size
        header[tname] = {"dtype": name, "shape": tshape, "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the payload starts 8-byte aligned, as Python's writer pads it
    with open(os.path.join(args.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for tname, tshape, norm in plan:
            n = int(np.prod(tshape)) * size
            if norm:
                f.write(ones)
                continue
            written = 0
            while written < n:
                start = int(rng.integers(0, len(pool) // size)) * size
                piece = min(n - written, len(pool) - start)
                f.write(pool[start:start + piece])
                written += piece
    hd = shape["hidden"] // shape["heads"]
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": shape["vocab"],
        "hidden_size": shape["hidden"], "intermediate_size": shape["intermediate"],
        "num_hidden_layers": shape["layers"], "num_attention_heads": shape["heads"],
        "num_key_value_heads": shape["kv_heads"], "head_dim": hd, "hidden_act": "silu",
        "max_position_embeddings": shape["context"], "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "rope_scaling": None, "attention_bias": False, "tie_word_embeddings": False,
        "torch_dtype": {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}[args.dtype],
    }
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    np.save(os.path.join(args.out, "tokens.npy"), rng.integers(0, shape["vocab"], args.tokens, dtype=np.int32))
    params = sum(int(np.prod(s)) for _, s, _ in plan)
    print(f"{args.out}: {args.shape}, {params / 1e9:.2f} B parameters, {offset / 2**30:.2f} GiB of {name}")


if __name__ == "__main__":
    main()
