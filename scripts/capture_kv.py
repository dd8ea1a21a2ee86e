#!/usr/bin/python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Capture post-RoPE Q and K and V of every attention layer of a PyTorch model into a KVLens
model dump (.safetensors), and read such dumps back.

The dump (what `"regime": {"name": "model", ...}` reads):
  * one F16 tensor per layer and kind, named layers.{L}.k, layers.{L}.v, layers.{L}.q, each of
    shape [batch, heads, tokens, head_dim]; Q may have more heads than K and V (grouped-query
    attention: Q head h uses K/V head h // (q_heads / kv_heads));
  * __metadata__ (strings): kvlens_dump "1", model, rope ("post": K and Q after the rotary
    embedding), positions (the token positions, "0..T-1"), source (where the prompt came from),
    layers, q_heads, kv_heads, head_dim, tokens, and anything the caller adds.

How it captures: Hugging Face Llama, Qwen2 and GPT-NeoX style attention modules call a module-level
apply_rotary_pos_emb(q, k, cos, sin, ...) once per layer and forward; the capture replaces that
function in the model's module namespace for the duration of one forward pass and records what it
returns (post-RoPE Q and K, [batch, heads, tokens, head_dim]). V is taken from a forward hook on
each attention module's v_proj (or, for GPT-NeoX's fused query_key_value, from the third of its
split). The tiny model of scripts/train_tiny_lm.py uses the same hook points, so
`capture(model, ids)` works on it unchanged.

Use:
  /usr/bin/python3 scripts/capture_kv.py --model PATH_OR_NAME --prompt-file prompt.txt --out dump.safetensors
      [--max-tokens 1024]     # needs the `transformers` package
  /usr/bin/python3 scripts/capture_kv.py --check dump.safetensors   # read back and summarize
"""

import argparse
import contextlib
import json
import struct
import sys

import numpy as np


# ----------------------------------------------------------------------------- the file format

def write_dump(path, layers, metadata):
    """layers: list over layers of dicts {"q": array, "k": array, "v": array}, each
    [batch, heads, tokens, head_dim] (numpy or torch). Written as F16, C order."""
    tensors = []
    for index, kinds in enumerate(layers):
        for kind in ("k", "v", "q"):
            a = kinds[kind]
            if hasattr(a, "detach"):
                a = a.detach().to("cpu").float().numpy()
            a = np.ascontiguousarray(np.asarray(a, dtype=np.float16))
            if a.ndim != 4:
                raise ValueError(f"layers.{index}.{kind}: expected [batch, heads, tokens, head_dim], got {a.shape}")
            tensors.append((f"layers.{index}.{kind}", a))
    first = layers[0]
    meta = {
        "kvlens_dump": "1",
        "layers": str(len(layers)),
        "q_heads": str(int(first["q"].shape[1])),
        "kv_heads": str(int(first["k"].shape[1])),
        "head_dim": str(int(first["k"].shape[3])),
        "tokens": str(int(first["k"].shape[2])),
    }
    meta.update({k: str(v) for k, v in metadata.items()})
    header = {"__metadata__": meta}
    offset = 0
    for name, a in tensors:
        header[name] = {"dtype": "F16", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)  # the data start 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, a in tensors:
            f.write(a.tobytes())


def read_dump(path):
    """(metadata dict, {name: float32 array}) of a dump written by write_dump."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    meta = header.pop("__metadata__", {})
    dtypes = {"F16": np.float16, "F32": np.float32, "BF16": None}
    out = {}
    for name, info in header.items():
        start, end = info["data_offsets"]
        dtype = dtypes[info["dtype"]]
        if dtype is None:
            raw = np.frombuffer(data[start:end], dtype=np.uint16).astype(np.uint32) << 16
            a = raw.view(np.float32)
        else:
            a = np.frombuffer(data[start:end], dtype=dtype).astype(np.float32)
        out[name] = a.reshape(info["shape"])
    return meta, out


# ----------------------------------------------------------------------------- the capture

@contextlib.contextmanager
def _patched_rope(modules, record):
    """Replaces apply_rotary_pos_emb in each module namespace by a recording wrapper."""
    saved = []
    for m in modules:
        original = getattr(m, "apply_rotary_pos_emb")

        def wrapper(q, k, *args, __original=original, **kwargs):
            q_out, k_out = __original(q, k, *args, **kwargs)
            record.append((q_out.detach(), k_out.detach()))
            return q_out, k_out

        saved.append((m, original))
        setattr(m, "apply_rotary_pos_emb", wrapper)
    try:
        yield
    finally:
        for m, original in saved:
            setattr(m, "apply_rotary_pos_emb", original)


def _attention_modules(model):
    """The attention modules, in layer order: those with a v_proj or a fused query_key_value."""
    found = []
    for name, module in model.named_modules():
        if hasattr(module, "v_proj") or hasattr(module, "query_key_value"):
            found.append((name, module))
    return found


def capture(model, input_ids, rope_modules=None, extra_metadata=None):
    """Runs one forward pass of `model` on input_ids [1, T] and returns the dump's layers list.
    `rope_modules`: the Python modules whose apply_rotary_pos_emb the attention calls (default:
    the modules that define the attention classes)."""
    import torch

    attention = _attention_modules(model)
    if not attention:
        raise RuntimeError("no attention module with v_proj or query_key_value found")
    if rope_modules is None:
        rope_modules = []
        for _, module in attention:
            m = sys.modules[type(module).__module__]
            if hasattr(m, "apply_rotary_pos_emb") and m not in rope_modules:
                rope_modules.append(m)
    if not rope_modules:
        raise RuntimeError("the attention modules' Python module has no apply_rotary_pos_emb to record")
    qk = []
    values = []
    hooks = []
    for _, module in attention:
        if hasattr(module, "v_proj"):
            def on_v(_m, _inputs, output, __module=module):
                values.append((__module, output.detach()))
            hooks.append(module.v_proj.register_forward_hook(on_v))
        else:
            def on_qkv(_m, _inputs, output, __module=module):
                values.append((__module, output.detach()))
            hooks.append(module.query_key_value.register_forward_hook(on_qkv))
    try:
        with torch.no_grad(), _patched_rope(rope_modules, qk):
            model(input_ids)
    finally:
        for h in hooks:
            h.remove()
    if len(qk) != len(attention) or len(values) != len(attention):
        raise RuntimeError(f"recorded {len(qk)} rotary calls and {len(values)} value projections for "
                           f"{len(attention)} attention modules")
    layers = []
    for (q, k), (module, v) in zip(qk, values):
        kv_heads, head_dim = k.shape[1], k.shape[3]
        batch, tokens = v.shape[0], v.shape[1]
        if hasattr(module, "v_proj"):
            v = v.view(batch, tokens, kv_heads, head_dim).transpose(1, 2)
        else:  # GPT-NeoX: [b, t, heads * 3 * head_dim], per head (q, k, v)
            v = v.view(batch, tokens, kv_heads, 3 * head_dim)[..., 2 * head_dim:].transpose(1, 2)
        layers.append({"q": q, "k": k, "v": v})
    return layers


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a Hugging Face model name or folder (needs transformers)")
    parser.add_argument("--prompt-file", help="text to run through the model")
    parser.add_argument("--out", help="the dump to write (.safetensors)")
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--check", metavar="DUMP", help="read a dump back and print its layout")
    args = parser.parse_args()
    if args.check:
        meta, tensors = read_dump(args.check)
        print(json.dumps(meta, indent=1))
        for name in sorted(tensors, key=lambda n: (len(n), n)):
            print(name, tensors[name].shape)
        return 0
    if not (args.model and args.prompt_file and args.out):
        parser.error("--model, --prompt-file and --out are needed (or --check DUMP)")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32)
    model.eval()
    text = open(args.prompt_file, encoding="utf-8").read()
    ids = tokenizer(text, return_tensors="pt").input_ids[:, : args.max_tokens]
    layers = capture(model, ids)
    write_dump(args.out, layers, {"model": args.model, "rope": "post", "positions": f"0..{ids.shape[1] - 1}",
                                  "source": args.prompt_file})
    print(f"wrote {args.out}: {len(layers)} layers, {ids.shape[1]} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
