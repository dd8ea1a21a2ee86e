#!/usr/bin/python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write GGUF files as llama.cpp's converter would: a Llama-shaped model with random weights (for
benchmarks), a small Hugging Face Llama folder converted, or the fuzz seed corpus of tests/data/gguf.

  /usr/bin/python3 scripts/make_gguf.py --out model.gguf [--layers 22 --hidden 2048 --heads 32
      --kv-heads 4 --ffn 5632 --vocab 258 --ctx 2048 --weights q4_k_m --tokenizer llama --seed 1]
  /usr/bin/python3 scripts/make_gguf.py --out llama_gqa.gguf --from-safetensors tests/data/models/llama_gqa
  /usr/bin/python3 scripts/make_gguf.py --seeds tests/data/gguf

Weights: f32, f16, bf16, q8_0 (ggml's reference quantizer), q6_k, q4_k_m (the mix llama.cpp's
Q4_K_M gives a Llama: attn_v, ffn_down and output in Q6_K, the other matrices in Q4_K; norms f32).
The K types use a simple valid encoding (the same as KVLens's ggml::quantizeRow), not ggml's search.
Q and K projection rows are permuted from Hugging Face's rotate-half pairing to ggml's interleaved
one, per head: reshape(heads, 2, rows / heads / 2, cols).swapaxes(1, 2) (K with the KV head count),
as convert_hf_to_gguf.py's LlamaModel.permute does, so a reader must apply RoPE in ggml's pairing.
The tokenizer is a byte vocabulary: "llama" (SentencePiece-style: <s>, </s>, then <0x00> .. <0xFF>
as byte tokens) or "gpt2" (GPT-2's byte-to-unicode characters, no merges, <|endoftext|>); a vocabulary
larger than that is padded with unused tokens. numpy only (Debian's python3-numpy).
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

ALIGNMENT = 32
QK_K = 256
# ggml type ids (ggml.h) and bytes per block of 32 / 256 values.
TYPE_ID = {"f32": 0, "f16": 1, "q8_0": 8, "q4_k": 12, "q5_k": 13, "q6_k": 14, "bf16": 30, "q4_0": 2}
# llama_ftype (llama.h) for general.file_type.
FILE_TYPE = {"f32": 0, "f16": 1, "q8_0": 7, "q4_k_m": 15, "q6_k": 18, "bf16": 32}


# --- quantizers (numpy, rows of x along the last axis) -----------------------------------------------

def to_f16(x):
    return x.astype(np.float16).view(np.uint16)


def to_bf16(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16  # round to nearest even (finite values)
    return rounded.astype(np.uint16)


def q8_0(x):
    """quantize_row_q8_0_ref: d = amax / 127, q = roundf(x / d) (half away from zero)."""
    b = x.reshape(-1, 32).astype(np.float32)
    amax = np.abs(b).max(axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    v = b * inv[:, None]
    q = (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.int8)
    out = np.zeros((b.shape[0], 34), np.uint8)
    out[:, 0:2] = to_f16(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.reshape(-1)


def _cover(value, step, top):
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.where(step[:, None] > 0, np.ceil(value / step[:, None]), 0)
    return np.clip(c, 0, top).astype(np.int64)


def q4_k(x):
    """Per 32-value sub-block [min(0, min), max] over 15 steps; 6-bit scales rounded up."""
    b = x.reshape(-1, 8, 32).astype(np.float32)
    lift = -np.minimum(0, b.min(axis=2))
    scale = (np.maximum(0, b.max(axis=2)) + lift) / 15
    d = np.float16(scale.max(axis=1) / 63).astype(np.float32)
    dmin = np.float16(lift.max(axis=1) / 63).astype(np.float32)
    sc, m = _cover(scale, d, 63), _cover(lift, dmin, 63)
    step = d[:, None] * sc
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(step[:, :, None] > 0, np.rint((b + (dmin[:, None] * m)[:, :, None]) / step[:, :, None]), 0)
    q = np.clip(q, 0, 15).astype(np.uint8)
    out = np.zeros((b.shape[0], 144), np.uint8)
    out[:, 0:2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = dmin.astype(np.float16).view(np.uint8).reshape(-1, 2)
    scales = np.zeros((b.shape[0], 12), np.uint8)
    for j in range(4):  # get_scale_min_k4's packing
        scales[:, j] = (sc[:, j] & 63) | ((sc[:, j + 4] >> 4) << 6)
        scales[:, j + 4] = (m[:, j] & 63) | ((m[:, j + 4] >> 4) << 6)
        scales[:, j + 8] = (sc[:, j + 4] & 15) | ((m[:, j + 4] & 15) << 4)
    out[:, 4:16] = scales
    qs = q.reshape(-1, 4, 2, 32)  # chunk c: sub-blocks 2c (low nibbles) and 2c + 1 (high)
    out[:, 16:] = (qs[:, :, 0, :] | (qs[:, :, 1, :] << 4)).reshape(-1, 128)
    return out.reshape(-1)


def q6_k(x):
    """Per 16-value sub-block max |x| over codes -31..31 (stored + 32); 8-bit scales rounded up."""
    b = x.reshape(-1, 16, 16).astype(np.float32)
    scale = np.abs(b).max(axis=2) / 31
    d = np.float16(scale.max(axis=1) / 127).astype(np.float32)
    sc = _cover(scale, d, 127)
    step = d[:, None] * sc
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(step[:, :, None] > 0, np.rint(b / step[:, :, None]), 0)
    q = (np.clip(q, -32, 31) + 32).astype(np.uint8).reshape(-1, 2, 4, 32)  # half, run t, l
    out = np.zeros((b.shape[0], 210), np.uint8)
    ql = (q[:, :, 0:2, :] & 15) | ((q[:, :, 2:4, :] & 15) << 4)  # runs 0, 1 low nibbles; 2, 3 high
    out[:, 0:128] = ql.reshape(-1, 128)
    qh = sum(((q[:, :, t, :] >> 4) & 3) << (2 * t) for t in range(4))
    out[:, 128:192] = qh.reshape(-1, 64)
    out[:, 192:208] = sc.astype(np.int8).view(np.uint8)
    out[:, 208:210] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    return out.reshape(-1)


def encode(x, kind):
    x = np.ascontiguousarray(x, dtype=np.float32)
    if kind == "f32":
        return x.view(np.uint8).reshape(-1)
    if kind == "f16":
        return to_f16(x).view(np.uint8).reshape(-1)
    if kind == "bf16":
        return to_bf16(x).view(np.uint8).reshape(-1)
    return {"q8_0": q8_0, "q4_k": q4_k, "q6_k": q6_k}[kind](x)


# --- the GGUF container ------------------------------------------------------------------------------

class Gguf:
    def __init__(self):
        self.kv = []       # (key, encoded type + value)
        self.tensors = []  # (name, dims innermost first, type id, bytes)

    @staticmethod
    def _str(s):
        b = s.encode("utf-8") if isinstance(s, str) else s
        return struct.pack("<Q", len(b)) + b

    def add(self, key, vtype, value):
        fmt = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
        body = self._str(value) if vtype == 8 else struct.pack(fmt[vtype], value)
        self.kv.append((key, struct.pack("<I", vtype) + body))

    def add_array(self, key, etype, values):
        fmt = {0: "<B", 4: "<I", 5: "<i", 6: "<f"}
        body = struct.pack("<IQ", etype, len(values))
        body += b"".join(self._str(v) if etype == 8 else struct.pack(fmt[etype], v) for v in values)
        self.kv.append((key, struct.pack("<I", 9) + body))

    def add_tensor(self, name, array, kind):
        """array: numpy, rows along the last axis (a [rows x cols] matrix is stored cols, rows)."""
        self.tensors.append((name, list(reversed(array.shape)), TYPE_ID[kind], encode(array, kind).tobytes()))

    def to_bytes(self, version=3):
        out = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(self.tensors), len(self.kv)))
        for key, body in self.kv:
            out += self._str(key) + body
        offset, offsets = 0, []
        for name, dims, tid, data in self.tensors:
            offsets.append(offset)
            out += self._str(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
            out += struct.pack("<IQ", tid, offset)
            offset += (len(data) + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
        out += b"\0" * (-len(out) % ALIGNMENT)
        for (_, _, _, data), off in zip(self.tensors, offsets):
            out += data + b"\0" * (-len(data) % ALIGNMENT)
        return bytes(out)


# --- a Llama model -----------------------------------------------------------------------------------

def permute(w, heads):
    """HF rotate-half rows to ggml's pairing (convert_hf_to_gguf.py, LlamaModel.permute)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gpt2_byte_chars():
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def add_tokenizer(g, kind, vocab):
    if kind == "llama":
        tokens = ["<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
        types = [3, 3] + [6] * 256  # CONTROL, BYTE (llama_token_type)
        bos, eos = 0, 1
    else:
        tokens = ["<|endoftext|>"] + gpt2_byte_chars()
        types = [3] + [1] * 256  # CONTROL, NORMAL
        bos = eos = 0
    if vocab == 256 and kind == "llama":  # a pure byte vocabulary (the shipped tiny-llama): no <s>, </s>
        tokens, types, bos, eos = tokens[2:], types[2:], None, None
    if vocab < len(tokens):
        sys.exit(f"--vocab {vocab} is smaller than the byte vocabulary ({len(tokens)} tokens)")
    tokens += [f"<unused{i}>" for i in range(vocab - len(tokens))]
    types += [5] * (vocab - len(types))  # UNUSED
    g.add("tokenizer.ggml.model", 8, kind)
    g.add("tokenizer.ggml.pre", 8, "default")
    g.add_array("tokenizer.ggml.tokens", 8, tokens)
    g.add_array("tokenizer.ggml.token_type", 5, types)
    if kind == "llama":
        g.add_array("tokenizer.ggml.scores", 6, [0.0] * vocab)
    else:
        g.add_array("tokenizer.ggml.merges", 8, [])
    if bos is not None:
        g.add("tokenizer.ggml.bos_token_id", 4, bos)
        g.add("tokenizer.ggml.eos_token_id", 4, eos)
    g.add("tokenizer.ggml.add_bos_token", 7, kind == "llama" and bos is not None)


def weight_kind(name, mix):
    if mix != "q4_k_m":
        return mix
    return "q6_k" if name.endswith(("attn_v", "ffn_down")) or name == "output" else "q4_k"


def write_llama(path, hp, weights, mix, tokenizer, name):
    """weights: HF-named numpy arrays (out x in); hp: the hyperparameters."""
    g = Gguf()
    g.add("general.architecture", 8, "llama")
    g.add("general.name", 8, name)
    g.add("general.file_type", 4, FILE_TYPE[mix])
    g.add("llama.vocab_size", 4, hp["vocab"])
    g.add("llama.context_length", 4, hp["ctx"])
    g.add("llama.embedding_length", 4, hp["hidden"])
    g.add("llama.block_count", 4, hp["layers"])
    g.add("llama.feed_forward_length", 4, hp["ffn"])
    g.add("llama.attention.head_count", 4, hp["heads"])
    g.add("llama.attention.head_count_kv", 4, hp["kv_heads"])
    g.add("llama.rope.dimension_count", 4, hp["head_dim"])
    g.add("llama.rope.freq_base", 6, hp["theta"])
    g.add("llama.attention.layer_norm_rms_epsilon", 6, hp["eps"])
    if hp["head_dim"] * hp["heads"] != hp["hidden"]:
        g.add("llama.attention.key_length", 4, hp["head_dim"])
        g.add("llama.attention.value_length", 4, hp["head_dim"])
    add_tokenizer(g, tokenizer, hp["vocab"])

    def mat(gguf_name, array):
        kind = weight_kind(gguf_name, mix)
        if array.shape[-1] % (QK_K if kind in ("q4_k", "q6_k") else 32 if kind == "q8_0" else 1):
            kind = "f16" if mix != "f32" else "f32"  # a row too short for the block: llama.cpp falls back too
        g.add_tensor(gguf_name + ".weight", array, kind)

    mat("token_embd", weights["model.embed_tokens.weight"])
    for i in range(hp["layers"]):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        g.add_tensor(b + "attn_norm.weight", weights[p + "input_layernorm.weight"], "f32")
        mat(b + "attn_q", permute(weights[p + "self_attn.q_proj.weight"], hp["heads"]))
        mat(b + "attn_k", permute(weights[p + "self_attn.k_proj.weight"], hp["kv_heads"]))
        mat(b + "attn_v", weights[p + "self_attn.v_proj.weight"])
        mat(b + "attn_output", weights[p + "self_attn.o_proj.weight"])
        g.add_tensor(b + "ffn_norm.weight", weights[p + "post_attention_layernorm.weight"], "f32")
        mat(b + "ffn_gate", weights[p + "mlp.gate_proj.weight"])
        mat(b + "ffn_up", weights[p + "mlp.up_proj.weight"])
        mat(b + "ffn_down", weights[p + "mlp.down_proj.weight"])
    g.add_tensor("output_norm.weight", weights["model.norm.weight"], "f32")
    if "lm_head.weight" in weights:
        mat("output", weights["lm_head.weight"])
    with open(path, "wb") as f:
        f.write(g.to_bytes())
    print(f"{path}: {len(g.tensors)} tensors, {os.path.getsize(path)} bytes ({mix}, tokenizer {tokenizer})")


def random_llama(args):
    rng = np.random.default_rng(args.seed)
    h, f, v = args.hidden, args.ffn, args.vocab
    hd = h // args.heads
    kvd = hd * args.kv_heads
    w = {"model.embed_tokens.weight": rng.normal(0, 1, (v, h)), "model.norm.weight": np.ones(h),
         "lm_head.weight": rng.normal(0, h ** -0.5, (v, h))}
    for i in range(args.layers):
        p = f"model.layers.{i}."
        for name, shape in (("self_attn.q_proj", (h, h)), ("self_attn.k_proj", (kvd, h)), ("self_attn.v_proj", (kvd, h)),
                            ("self_attn.o_proj", (h, h)), ("mlp.gate_proj", (f, h)), ("mlp.up_proj", (f, h)),
                            ("mlp.down_proj", (h, f))):
            w[p + name + ".weight"] = rng.normal(0, shape[1] ** -0.5, shape)
        w[p + "input_layernorm.weight"] = np.ones(h)
        w[p + "post_attention_layernorm.weight"] = np.ones(h)
    hp = {"vocab": v, "ctx": args.ctx, "hidden": h, "layers": args.layers, "ffn": f, "heads": args.heads,
          "kv_heads": args.kv_heads, "head_dim": hd, "theta": 10000.0, "eps": 1e-5}
    write_llama(args.out, hp, {k: np.asarray(a, np.float32) for k, a in w.items()}, args.weights, args.tokenizer,
                f"random-llama-{args.layers}x{h}")


# --- a Hugging Face folder ---------------------------------------------------------------------------

def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = t["data_offsets"]
        raw = np.frombuffer(data[begin:end], np.uint8)
        if t["dtype"] == "F32":
            a = raw.view(np.float32)
        elif t["dtype"] == "F16":
            a = raw.view(np.float16).astype(np.float32)
        elif t["dtype"] == "BF16":
            a = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            sys.exit(f"{path}: tensor {name}: dtype {t['dtype']} is not supported (F32, F16, BF16)")
        out[name] = a.reshape(t["shape"])
    return out


def from_safetensors(args):
    folder = args.from_safetensors
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type") != "llama":
        sys.exit(f"{folder}: model_type {cfg.get('model_type')!r}; only Llama folders are converted")
    index = os.path.join(folder, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    weights = {}
    for name in files:
        weights.update(read_safetensors(os.path.join(folder, name)))
    heads = cfg["num_attention_heads"]
    theta = cfg.get("rope_theta") or (cfg.get("rope_parameters") or {}).get("rope_theta", 10000.0)
    hp = {"vocab": cfg["vocab_size"], "ctx": cfg.get("max_position_embeddings", 2048), "hidden": cfg["hidden_size"],
          "layers": cfg["num_hidden_layers"], "ffn": cfg["intermediate_size"], "heads": heads,
          "kv_heads": cfg.get("num_key_value_heads") or heads,
          "head_dim": cfg.get("head_dim") or cfg["hidden_size"] // heads, "theta": float(theta),
          "eps": float(cfg.get("rms_norm_eps", 1e-5))}
    if cfg.get("tie_word_embeddings"):
        weights.pop("lm_head.weight", None)
    write_llama(args.out, hp, weights, args.weights, args.tokenizer, os.path.basename(os.path.normpath(folder)))


# --- the fuzz seeds ----------------------------------------------------------------------------------

def write_seeds(folder):
    """Small valid files and hostile variants for fuzz/fuzz_gguf.cpp (scripts/fuzz.sh copies them)."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(5)
    g = Gguf()
    g.add("general.architecture", 8, "llama")
    g.add_array("seed.floats", 6, [0.5, -1.0])
    x = rng.normal(0, 1, (2, 256)).astype(np.float32)  # the same values in every type, so a test can compare
    for kind in ("f32", "f16", "bf16", "q8_0", "q4_k", "q6_k"):
        g.add_tensor("t." + kind, x, kind)
    valid = g.to_bytes()
    files = {"types_v3.gguf": valid, "types_v2.gguf": valid[:4] + struct.pack("<I", 2) + valid[8:]}
    files["version1.gguf"] = valid[:4] + struct.pack("<I", 1) + valid[8:]
    files["truncated.gguf"] = valid[:200]
    k = Gguf()
    k.add("general.architecture", 8, "llama")
    k.kv.append(("huge", struct.pack("<IIQ", 9, 0, 1 << 60)))
    files["array_2p60.gguf"] = k.to_bytes()
    d = Gguf()
    d.add("a", 4, 1)
    d.add("a", 4, 2)
    files["duplicate_key.gguf"] = d.to_bytes()
    t = Gguf()
    t.add_tensor("w", np.zeros((1, 32), np.float32), "f32")
    t.tensors[0] = ("w", [32, 1], 16, t.tensors[0][3])  # ggml type 16 (iq2_xxs): unknown to KVLens
    files["unknown_type.gguf"] = t.to_bytes()
    for name, data in files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
        print(f"{folder}/{name}: {len(data)} bytes")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="the GGUF file to write")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=258)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--weights", choices=sorted(FILE_TYPE), default="q4_k_m")
    ap.add_argument("--tokenizer", choices=["llama", "gpt2"], default="llama")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--from-safetensors", metavar="DIR", help="convert this Hugging Face Llama folder")
    ap.add_argument("--seeds", metavar="DIR", help="write the fuzz seed corpus into DIR")
    args = ap.parse_args()
    if args.seeds:
        write_seeds(args.seeds)
    elif not args.out:
        ap.error("--out is required")
    elif args.from_safetensors:
        from_safetensors(args)
    else:
        if args.hidden % args.heads or args.heads % args.kv_heads or (args.hidden // args.heads) % 2:
            ap.error("--hidden must split into --heads of even size, and --heads into --kv-heads groups")
        random_llama(args)


if __name__ == "__main__":
    main()
