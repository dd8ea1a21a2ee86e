#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
# Writes resources/examples/kv_example.safetensors: one layer's K, V, Q as a small model would dump them.
#
# Plain Python 3 (random, struct, json), no NumPy or PyTorch: the file is reproducible byte for byte.
# Layout [batch = 1, heads = 4, tokens = 256, head_dim = 64], F16, like
# safetensors.torch.save_file({"k": k, "v": v, "q": q}, path) on tensors from an attention layer.
# What makes it look like a real layer rather than white noise:
#   - keys have a few outlier channels (x6 to x12) and a shared mean direction, and lie mostly in
#     a 12-dimensional subspace (low effective rank), as pre-RoPE keys of trained models do;
#   - queries are built from the same subspace, so attention is peaked on a few tokens;
#   - values are closer to isotropic, with a milder outlier channel.
# Usage: scripts/make_example_tensors.py [out.safetensors]
import json
import math
import os
import random
import struct
import sys

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "resources", "examples", "kv_example.safetensors")
BATCH, HEADS, TOKENS, DIM, RANK = 1, 4, 256, 64, 12


def unit_basis(rng, rank, dim):
    """`rank` orthonormal vectors of length `dim` (Gram-Schmidt on Gaussian draws)."""
    basis = []
    while len(basis) < rank:
        v = [rng.gauss(0.0, 1.0) for _ in range(dim)]
        for b in basis:
            dot = sum(x * y for x, y in zip(v, b))
            v = [x - dot * y for x, y in zip(v, b)]
        norm = math.sqrt(sum(x * x for x in v))
        if norm > 1e-6:
            basis.append([x / norm for x in v])
    return basis


def head_tensors(rng, head):
    basis = unit_basis(rng, RANK, DIM)
    spectrum = [3.0 * 0.8 ** i for i in range(RANK)]
    outliers = {(head * 7 + 3) % DIM: 12.0, (head * 13 + 17) % DIM: 6.0}
    mean = [0.3 * rng.gauss(0.0, 1.0) for _ in range(DIM)]
    k, v, q = [], [], []
    for _ in range(TOKENS):
        coeffs = [s * rng.gauss(0.0, 1.0) for s in spectrum]
        row = [mean[j] + 0.15 * rng.gauss(0.0, 1.0) for j in range(DIM)]
        for c, b in zip(coeffs, basis):
            for j in range(DIM):
                row[j] += c * b[j]
        for j, scale in outliers.items():
            row[j] *= scale
        k.append(row)
        vrow = [rng.gauss(0.0, 1.0) for _ in range(DIM)]
        vrow[(head * 5 + 1) % DIM] *= 4.0
        v.append(vrow)
        qc = [1.5 * s * rng.gauss(0.0, 1.0) for s in spectrum]
        qrow = [0.2 * rng.gauss(0.0, 1.0) for _ in range(DIM)]
        for c, b in zip(qc, basis):
            for j in range(DIM):
                qrow[j] += c * b[j]
        q.append(qrow)
    return k, v, q


def f16_bytes(rows):
    return b"".join(struct.pack("<%de" % len(r), *r) for r in rows)


def main():
    rng = random.Random(20240611)
    parts = {"k": [], "v": [], "q": []}
    for head in range(HEADS):
        k, v, q = head_tensors(rng, head)
        parts["k"].append(f16_bytes(k))
        parts["v"].append(f16_bytes(v))
        parts["q"].append(f16_bytes(q))
    header = {"__metadata__": {"layout": "batch,heads,tokens,head_dim",
                               "source": "scripts/make_example_tensors.py (synthetic, seed 20240611)"}}
    payload = b""
    for name in ("k", "v", "q"):
        data = b"".join(parts[name])
        header[name] = {"dtype": "F16", "shape": [BATCH, HEADS, TOKENS, DIM],
                        "data_offsets": [len(payload), len(payload) + len(data)]}
        payload += data
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(OUT, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.write(payload)


if __name__ == "__main__":
    main()
