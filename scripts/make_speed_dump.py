#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""A large synthetic model dump for the model lens's speed case (not a trained model).

    /usr/bin/python3 scripts/make_speed_dump.py OUT.safetensors [--layers 32 --heads 32 --tokens 2048 --head-dim 128]

Writes layers.{L}.k/v/q of shape [1, heads, tokens, head_dim] in F16 (32 x 32 x 2048 x 128: 1.6 GB), in the
format scripts/capture_kv.py writes. Keys have log-normal per-channel scales (a few outlier channels, as real
keys do), queries are keys of the same head plus noise, values are Gaussian: enough structure for the
attention to be peaked, with numbers that only measure speed. Deterministic for --seed."""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capture_kv  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    layers = []
    shape = (1, a.heads, a.tokens, a.head_dim)
    for _ in range(a.layers):
        scale = np.exp(rng.normal(0.0, 0.6, size=(1, a.heads, 1, a.head_dim))).astype(np.float32)
        k = rng.standard_normal(shape, dtype=np.float32) * scale
        q = (k + rng.standard_normal(shape, dtype=np.float32) * scale) / (2.0 * np.sqrt(a.head_dim))
        v = rng.standard_normal(shape, dtype=np.float32)
        layers.append({"k": k.astype(np.float16), "v": v.astype(np.float16), "q": q.astype(np.float16)})
    capture_kv.write_dump(a.out, layers, {"model": "synthetic speed case (not trained)", "post_rope": "true",
                                          "source": "scripts/make_speed_dump.py seed " + str(a.seed)})
    print(f"wrote {a.out}: {a.layers} layers x {a.heads} heads x {a.tokens} tokens x {a.head_dim}")


if __name__ == "__main__":
    main()
