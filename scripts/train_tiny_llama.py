#!/usr/bin/python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Train KVLens's shipped example model in the Llama architecture and write it as a Hugging Face
folder (resources/models/tiny-llama/) that core/lm loads.

The model: LlamaForCausalLM, byte vocabulary (256, id = byte value, no tokenizer file), 4 layers,
hidden 256, 8 query heads of 32, 2 KV heads (grouped-query attention, 4 query heads per KV head),
SwiGLU MLP of 688, RMSNorm, rotate-half RoPE (theta 10000), untied lm_head. Trained as
scripts/train_tiny_lm.py trains the older example model: on the licence texts Debian installs in
/usr/share/common-licenses (every regular file but Apache-2.0, which is held out), on the CPU, one
thread, fixed seeds, deterministic kernels.

Written into the folder:
  config.json            the Hugging Face config (LlamaForCausalLM)
  model.safetensors      the weights, F16
  heldout.txt            the held-out text (the Apache License 2.0, verbatim)
  reference_logits.npy   float32 [2, 128, 256]: logits of the first two 128-byte chunks of
                         heldout.txt (each a fresh chunk at positions 0..127), computed in double
                         by scripts/lm_reference.py from the SAVED (F16-rounded) weights
  README.md              the model card (architecture, data, training, held-out loss, licence)

  /usr/bin/python3 scripts/train_tiny_llama.py [--steps 2500] [--out resources/models/tiny-llama]

Needs Debian's python3-torch and libblis4-pthread (see train_tiny_lm.py). CI does not run it.
"""

import argparse
import json
import math
import os
import shutil
import sys
import time

os.environ.setdefault("BLIS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lm_reference  # noqa: E402

LICENSES = "/usr/share/common-licenses"
HELD_OUT = "Apache-2.0"

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 256,
    "hidden_size": 256,
    "intermediate_size": 688,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "hidden_act": "silu",
    "max_position_embeddings": 512,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "rope_scaling": None,
    "attention_bias": False,
    "mlp_bias": False,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
}


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg, context):
        super().__init__()
        d, self.heads, self.kv_heads, self.head_dim = (cfg["hidden_size"], cfg["num_attention_heads"],
                                                       cfg["num_key_value_heads"], cfg["head_dim"])
        self.q_proj = nn.Linear(d, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, d, bias=False)
        inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, self.head_dim, 2, dtype=torch.float64) / self.head_dim))
        angles = torch.outer(torch.arange(context, dtype=torch.float64), inv)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos().float()[None, None], persistent=False)
        self.register_buffer("sin", angles.sin().float()[None, None], persistent=False)

    def forward(self, x):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.cos[:, :, :t], self.sin[:, :, :t]
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        group = self.heads // self.kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
        out = scores.softmax(dim=-1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


class Mlp(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, m = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_proj = nn.Linear(d, m, bias=False)
        self.up_proj = nn.Linear(d, m, bias=False)
        self.down_proj = nn.Linear(m, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, cfg, context):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.self_attn = Attention(cfg, context)
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.mlp = Mlp(cfg)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    def __init__(self, cfg, context):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList(Layer(cfg, context) for _ in range(cfg["num_hidden_layers"]))
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])


class TinyLlama(nn.Module):
    """Module names follow Hugging Face's LlamaForCausalLM, so state_dict() keys are the checkpoint's."""

    def __init__(self, cfg, context):
        super().__init__()
        self.model = Body(cfg, context)
        self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)

    def forward(self, ids):
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x)
        return self.lm_head(self.model.norm(x))


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


def heldout_loss(forward, held, chunk):
    """Mean NLL in nats per predicted byte over disjoint `chunk`-byte chunks of `held` (each from
    position 0; every position after a chunk's first is scored), and the number of bytes scored."""
    total, count = 0.0, 0
    for start in range(0, len(held) - 1, chunk):
        piece = held[start: start + chunk]
        if len(piece) < 2:
            break
        ids = torch.tensor(np.frombuffer(piece, dtype=np.uint8).astype(np.int64))
        logits = forward(ids)
        total += F.cross_entropy(logits[:-1].double(), ids[1:], reduction="sum").item()
        count += len(piece) - 1
    return total / count, count


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2500)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "resources",
                                                      "models", "tiny-llama"))
    args = parser.parse_args()

    torch.manual_seed(20261201)
    np.random.seed(20261201)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    train, held = corpus()
    data = torch.tensor(np.frombuffer(train, dtype=np.uint8).astype(np.int64))
    model = TinyLlama(CONFIG, args.context)
    params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01, betas=(0.9, 0.95))
    warmup = max(1, args.steps // 20)  # linear warm-up, then cosine decay to a tenth
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) * (0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, s / args.steps)))))
    generator = torch.Generator().manual_seed(1)
    start, cpu_start = time.time(), time.process_time()
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
        if step % 50 == 0 or step == args.steps - 1:
            print(f"step {step:5d}  loss {loss_value:.3f} nats/byte  {time.time() - start:6.0f} s", flush=True)
    training_seconds = time.time() - start
    training_cpu_seconds = time.process_time() - cpu_start  # what the run costs whatever else the machine does

    # Save: F16 weights in checkpoint order, then everything below is computed from the saved file.
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    state = model.state_dict()
    tensors = [(name, state[name].detach().numpy()) for name in state]
    weights_path = os.path.join(out, "model.safetensors")
    lm_reference.write_safetensors(weights_path, tensors, dtype="F16", metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
        f.write("\n")
    shutil.copyfile(os.path.join(LICENSES, HELD_OUT), os.path.join(out, "heldout.txt"))

    saved = lm_reference.read_safetensors(weights_path)
    reference = lambda ids: lm_reference.llama_forward(CONFIG, saved, ids)  # noqa: E731
    with torch.no_grad():
        model.eval()
        train_model_loss, _ = heldout_loss(lambda ids: model(ids[None])[0], held, args.context)
        loss512, scored512 = heldout_loss(reference, held, args.context)
        loss128, scored128 = heldout_loss(reference, held, 128)
        chunks = [held[i * 128:(i + 1) * 128] for i in range(2)]
        logits = np.stack([reference(torch.tensor(np.frombuffer(c, dtype=np.uint8).astype(np.int64))).numpy()
                           for c in chunks]).astype(np.float32)
    np.save(os.path.join(out, "reference_logits.npy"), logits)

    bits512 = loss512 / math.log(2)
    bits128 = loss128 / math.log(2)
    card = f"""# tiny-llama: KVLens's example model

A small byte-level language model in the Llama architecture, trained by
`scripts/train_tiny_llama.py` so that KVLens can run a real transformer end to end without
downloading anything. It is a toy: it knows the wording of software licences and little else.

## Architecture (config.json, `LlamaForCausalLM`)
- vocabulary: 256 bytes (token id = byte value; no tokenizer file)
- 4 layers, hidden size 256, RMSNorm (eps 1e-5)
- attention: 8 query heads of dimension 32, 2 key/value heads (grouped-query attention,
  4 query heads per KV head), rotate-half RoPE with theta 10000, no biases
- MLP: SwiGLU, intermediate size 688
- untied output head; {params} parameters, stored as F16 in model.safetensors
- trained context 512 (max_position_embeddings)

## Data
Training: every regular file in Debian's /usr/share/common-licenses except Apache-2.0
({len(train)} bytes; links skipped). Held out: the Apache License 2.0 (`heldout.txt`,
{len(held)} bytes), never seen in training.

## Training
AdamW (lr 3e-3, betas 0.9/0.95, weight decay 0.01), {args.steps} steps of {args.batch} random
windows of {args.context} bytes, linear warm-up over {warmup} steps then cosine decay to a tenth,
gradient clipping at 1.0; seeds 20261201 (torch, numpy) and 1 (window sampler); CPU, one thread,
deterministic kernels; {training_seconds:.0f} s wall time, {training_cpu_seconds:.0f} s of CPU time. Final running training loss {loss_value:.3f} nats/byte.

## Held-out quality (computed from the saved F16 weights)
| chunking of heldout.txt | bytes scored | loss (nats/byte) | bits per byte | perplexity |
|---|---|---|---|---|
| disjoint {args.context}-byte chunks | {scored512} | {loss512:.4f} | {bits512:.4f} | {math.exp(loss512):.3f} |
| disjoint 128-byte chunks | {scored128} | {loss128:.4f} | {bits128:.4f} | {math.exp(loss128):.3f} |

A uniform guess over 256 bytes costs 8 bits per byte (perplexity 256).

## Reference logits
`reference_logits.npy` (float32, [2, 128, 256]) holds the logits of the first two 128-byte chunks
of heldout.txt, each evaluated as a fresh chunk at positions 0..127, computed in double precision by
an independent PyTorch forward (scripts/lm_reference.py) from the saved F16 weights. KVLens's tests
compare its C++ forward against them.

## Licence
The weights, config and card are part of KVLens and are released under GPL-3.0-or-later.
heldout.txt is the Apache License 2.0, reproduced verbatim (copying it verbatim is permitted).
"""
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(card)
    print(f"parameters {params}; training {training_seconds:.0f} s wall, {training_cpu_seconds:.0f} s CPU")
    print(f"held-out (reference forward, saved weights): {loss512:.4f} nats/byte = {bits512:.4f} bits/byte "
          f"({args.context}-byte chunks); {bits128:.4f} bits/byte (128-byte chunks)")
    print(f"held-out (float32 training model): {train_model_loss:.4f} nats/byte")
    print(f"wrote {out}: " + ", ".join(f"{n} ({os.path.getsize(os.path.join(out, n))} bytes)" for n in sorted(os.listdir(out))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
