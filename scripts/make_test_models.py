#!/usr/bin/python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write the small random-weight Hugging Face model folders the core/lm tests load, with the
logits an independent PyTorch forward (scripts/lm_reference.py, double precision) computes for them.

Each folder in tests/data/models/ holds config.json, the weights (model.safetensors, or shards and
model.safetensors.index.json), tokens.npy (int64 [T], T = 32) and reference_logits.npy (float32
[T x vocab]: the logits of the tokens as one chunk at positions 0..T-1, computed from the weights
as SAVED, i.e. after rounding to the stored dtype):

  llama_gqa              Llama, 2 layers, hidden 64, 4 heads, 2 KV heads, head_dim 16, MLP 96,
                         vocab 300, untied, `rope_theta` 10000, F16
  llama_tied_ropeparams  Llama, tied embeddings, `rope_parameters` {rope_theta 500000}, head_dim 16
                         with hidden 48 and 4 heads (hidden / heads would be 12), 2 KV heads, F16
  qwen2_bias             Qwen2, q/k/v biases (o_proj none), use_sliding_window false, theta 1e6, F16
  gpt2                   GPT-2, tied, learned positions, gelu_new, bare names, plus an unused
                         `h.0.attn.bias` mask buffer as real checkpoints carry, F32
  gpt2_prefixed          GPT-2 with `transformer.` names, gelu_pytorch_tanh, explicit n_inner, F16
  llama_bf16_sharded     Llama with one KV head, BF16 weights split over two shards listed by
                         model.safetensors.index.json

Weights are drawn at scales that make attention far from uniform (q/k entries ~ N(0, 1/hidden)
times 2, untied embeddings N(0, 1)), so a wrong RoPE pairing or KV-head mapping moves the logits by far
more than the tests' 1e-4 tolerance; the script checks that it does and prints by how much.

  /usr/bin/python3 scripts/make_test_models.py [--out tests/data/models]
"""

import argparse
import json
import os
import sys
import zlib

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lm_reference as ref  # noqa: E402

TOKENS = 32
VOCAB = 300


def llama_weights(rng, cfg, qkv_bias=False):
    d = cfg["hidden_size"]
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    hd = cfg.get("head_dim") or d // heads
    inter, vocab = cfg["intermediate_size"], cfg["vocab_size"]
    n = lambda *shape, s=1.0: rng.normal(0.0, s, size=shape)  # noqa: E731
    # Tied: the embedding is also the head, so it is drawn small enough for logits of order 1.
    w = [("model.embed_tokens.weight", n(vocab, d, s=2.0 / np.sqrt(d) if cfg.get("tie_word_embeddings") else 1.0))]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w += [
            (p + "input_layernorm.weight", 1.0 + n(d, s=0.1)),
            (p + "self_attn.q_proj.weight", n(heads * hd, d, s=2.0 / np.sqrt(d))),
            (p + "self_attn.k_proj.weight", n(kv * hd, d, s=2.0 / np.sqrt(d))),
            (p + "self_attn.v_proj.weight", n(kv * hd, d, s=1.0 / np.sqrt(d))),
            (p + "self_attn.o_proj.weight", n(d, heads * hd, s=1.0 / np.sqrt(heads * hd))),
            (p + "post_attention_layernorm.weight", 1.0 + n(d, s=0.1)),
            (p + "mlp.gate_proj.weight", n(inter, d, s=1.0 / np.sqrt(d))),
            (p + "mlp.up_proj.weight", n(inter, d, s=1.0 / np.sqrt(d))),
            (p + "mlp.down_proj.weight", n(d, inter, s=1.0 / np.sqrt(inter))),
        ]
        if qkv_bias:
            w += [(p + "self_attn.q_proj.bias", n(heads * hd, s=0.3)),
                  (p + "self_attn.k_proj.bias", n(kv * hd, s=0.3)),
                  (p + "self_attn.v_proj.bias", n(kv * hd, s=0.3))]
    w.append(("model.norm.weight", 1.0 + n(d, s=0.1)))
    if not cfg.get("tie_word_embeddings", False):
        w.append(("lm_head.weight", n(vocab, d, s=1.0 / np.sqrt(d))))
    return w


def gpt2_weights(rng, cfg, prefix, mask_buffer=False):
    d, inter = cfg["n_embd"], cfg.get("n_inner") or 4 * cfg["n_embd"]
    n = lambda *shape, s=1.0: rng.normal(0.0, s, size=shape)  # noqa: E731
    w = [(prefix + "wte.weight", n(cfg["vocab_size"], d, s=0.25)),
         (prefix + "wpe.weight", n(cfg["n_positions"], d, s=0.5))]
    for i in range(cfg["n_layer"]):
        p = f"{prefix}h.{i}."
        w += [
            (p + "ln_1.weight", 1.0 + n(d, s=0.1)), (p + "ln_1.bias", n(d, s=0.1)),
            (p + "attn.c_attn.weight", n(d, 3 * d, s=2.0 / np.sqrt(d))), (p + "attn.c_attn.bias", n(3 * d, s=0.3)),
            (p + "attn.c_proj.weight", n(d, d, s=1.0 / np.sqrt(d))), (p + "attn.c_proj.bias", n(d, s=0.1)),
            (p + "ln_2.weight", 1.0 + n(d, s=0.1)), (p + "ln_2.bias", n(d, s=0.1)),
            (p + "mlp.c_fc.weight", n(d, inter, s=1.0 / np.sqrt(d))), (p + "mlp.c_fc.bias", n(inter, s=0.3)),
            (p + "mlp.c_proj.weight", n(inter, d, s=1.0 / np.sqrt(inter))), (p + "mlp.c_proj.bias", n(d, s=0.1)),
        ]
        if mask_buffer and i == 0:
            t = cfg["n_positions"]
            w.append((p + "attn.bias", np.tril(np.ones((t, t)))[None, None]))
    w += [(prefix + "ln_f.weight", 1.0 + n(d, s=0.1)), (prefix + "ln_f.bias", n(d, s=0.1))]
    return w


def write_folder(out, name, cfg, tensors, dtype, forward, shards=1):
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    for old in os.listdir(folder):
        os.remove(os.path.join(folder, old))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    if shards == 1:
        ref.write_safetensors(os.path.join(folder, "model.safetensors"), tensors, dtype, {"format": "pt"})
    else:
        per = (len(tensors) + shards - 1) // shards
        weight_map, total = {}, 0
        for s in range(shards):
            shard = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = tensors[s * per:(s + 1) * per]
            ref.write_safetensors(os.path.join(folder, shard), part, dtype, {"format": "pt"})
            for tname, a in part:
                weight_map[tname] = shard
                total += np.asarray(a).size * (4 if dtype == "F32" else 2)
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
            f.write("\n")
    saved = {}
    for fname in sorted(os.listdir(folder)):
        if fname.endswith(".safetensors"):
            saved.update(ref.read_safetensors(os.path.join(folder, fname)))
    rng = np.random.default_rng(zlib.crc32(name.encode()))  # the token draw depends on the folder only
    ids = rng.integers(0, cfg["vocab_size"], size=TOKENS)
    logits = forward(cfg, saved, ids)
    ref.write_npy_int64(os.path.join(folder, "tokens.npy"), ids)
    ref.write_npy_float32(os.path.join(folder, "reference_logits.npy"), logits.numpy())
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    print(f"{name}: {size} bytes, logits range [{logits.min():.3f}, {logits.max():.3f}]")
    return cfg, saved, ids, logits


def check_sensitivity(cfg, saved, ids, logits):
    """A wrong RoPE pairing (consecutive pairs) and a wrong KV mapping (h % kv) must move the logits."""
    original_rope = ref.rope

    def interleaved(x, theta):
        heads, t, d = x.shape
        pairs = x.reshape(heads, t, d // 2, 2)
        inv = torch.tensor([theta ** (-2.0 * i / d) for i in range(d // 2)], dtype=torch.float64)
        ang = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
        a, b = pairs[..., 0], pairs[..., 1]
        return torch.stack((a * torch.cos(ang) - b * torch.sin(ang), b * torch.cos(ang) + a * torch.sin(ang)), -1).reshape(x.shape)

    ref.rope = interleaved
    try:
        wrong_rope = (ref.llama_forward(cfg, saved, ids) - logits).abs().max().item()
    finally:
        ref.rope = original_rope
    original_repeat = torch.Tensor.repeat_interleave
    kv = cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    wrong_kv = float("nan")
    if kv > 1 and kv < cfg["num_attention_heads"]:
        torch.Tensor.repeat_interleave = lambda self, n, dim=0: self.repeat(n, 1, 1)  # head h reads h % kv
        try:
            wrong_kv = (ref.llama_forward(cfg, saved, ids) - logits).abs().max().item()
        finally:
            torch.Tensor.repeat_interleave = original_repeat
    print(f"  sensitivity: consecutive-pair RoPE moves the logits by {wrong_rope:.3g}, h % kv mapping by {wrong_kv:.3g}")
    if not wrong_rope > 1e-2 or (wrong_kv == wrong_kv and not wrong_kv > 1e-2):
        raise SystemExit("the test model does not tell a wrong RoPE pairing or KV mapping from the right one")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                                                      "models"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = os.path.abspath(args.out)
    rng = np.random.default_rng(20261201)

    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96,
           "vocab_size": VOCAB, "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "rope_scaling": None, "hidden_act": "silu", "attention_bias": False, "tie_word_embeddings": False}
    check_sensitivity(*write_folder(out, "llama_gqa", cfg, llama_weights(rng, cfg), "F16", ref.llama_forward))

    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 48, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 64,
           "vocab_size": VOCAB, "max_position_embeddings": 128, "rms_norm_eps": 1e-6,
           "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"}, "hidden_act": "silu",
           "tie_word_embeddings": True}
    check_sensitivity(*write_folder(out, "llama_tied_ropeparams", cfg, llama_weights(rng, cfg), "F16",
                                    ref.llama_forward))

    cfg = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 32, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 64, "vocab_size": VOCAB,
           "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "hidden_act": "silu",
           "use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 2, "tie_word_embeddings": False}
    check_sensitivity(*write_folder(out, "qwen2_bias", cfg, llama_weights(rng, cfg, qkv_bias=True), "F16",
                                    ref.llama_forward))

    cfg = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 32, "n_layer": 2, "n_head": 4,
           "n_inner": None, "n_positions": 64, "vocab_size": VOCAB, "layer_norm_epsilon": 1e-5,
           "activation_function": "gelu_new"}
    write_folder(out, "gpt2", cfg, gpt2_weights(rng, cfg, "", mask_buffer=True), "F32", ref.gpt2_forward)

    cfg = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 32, "n_layer": 2, "n_head": 2,
           "n_inner": 48, "n_positions": 40, "vocab_size": VOCAB, "layer_norm_epsilon": 1e-5,
           "activation_function": "gelu_pytorch_tanh", "tie_word_embeddings": True}
    write_folder(out, "gpt2_prefixed", cfg, gpt2_weights(rng, cfg, "transformer."), "F16",
                 lambda c, w, ids: ref.gpt2_forward(c, w, ids, prefix="transformer."))

    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 1, "intermediate_size": 64, "vocab_size": VOCAB,
           "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False}
    check_sensitivity(*write_folder(out, "llama_bf16_sharded", cfg, llama_weights(rng, cfg), "BF16",
                                    ref.llama_forward, shards=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
