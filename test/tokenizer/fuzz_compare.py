#!/usr/bin/env python3
"""Randomized parity check of swz-tokenize against llama.cpp (not part of ctest: needs
llama-cpp-python and takes a while). Random strings mix ASCII, whitespace of all kinds,
every Unicode plane, emoji, contractions, special-token texts and raw bytes.

    .venv/bin/python test/tokenizer/fuzz_compare.py build/runtime/tokenizer/swz-tokenize [N] [SEED]
"""
from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_reference as gen  # noqa: E402
import gguf_vocab  # noqa: E402

POOLS = [
    [chr(c) for c in range(0x20, 0x7F)] * 3,
    list(" \t\n\r\x0b\x0c") * 4 + ["\u00a0", "\u3000", "\u2009", "\u0085", "\u2028", "\u200b", "\u180e", "\u1680",
                                    "\ufeff", "\u001c", "\u001f"],
    [chr(c) for c in range(0x80, 0x800)],
    [chr(c) for c in range(0x800, 0xD800)],
    [chr(c) for c in range(0xE000, 0x10000)],
    [chr(c) for c in range(0x10000, 0x20000)],
    [chr(c) for c in range(0x1F300, 0x1FB00)],
    [chr(c) for c in range(0x20000, 0x110000, 37)],
    ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'Re", "<|im_start|>", "<|im_end|>", "<|endoftext|>",
     "</s>", "<s>", "<unk>", "<tool_call>", "<|fim_prefix|>", "\u200d", "\ufe0f", "\u0301", "123", "  ", "\r\n"],
]


def crashes_llama(b: bytes) -> bool:
    """llama.cpp's lenient UTF-8 decoder accepts 4-byte forms up to U+1FFFFF and then throws
    (uncaught, aborting the process) when re-encoding one above U+10FFFF; swz maps them to
    U+FFFD instead. Such inputs are left out of the comparison."""
    i = 0
    while i < len(b):
        c = b[i]
        n = 4 if c & 0xF8 == 0xF0 else 3 if c & 0xF0 == 0xE0 else 2 if c & 0xE0 == 0xC0 else 1
        if i + n <= len(b) and all(x & 0xC0 == 0x80 for x in b[i + 1:i + n]):
            if n == 4 and (((c & 7) << 18) | ((b[i + 1] & 0x3F) << 12)) > 0x10FFFF:
                return True
            i += n
        else:
            i += 1
    return False


def random_texts(n: int, rng: random.Random) -> list[bytes]:
    out = []
    for _ in range(n):
        out.append("".join(rng.choice(rng.choice(POOLS)) for _ in range(rng.randint(1, 40))).encode())
    out += [bytes(rng.randint(0, 255) for _ in range(rng.randint(1, 20))) for _ in range(n // 10)]
    return [t for t in out if not crashes_llama(t)]


def main() -> int:
    exe = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    texts = random_texts(n, rng)
    spm = os.path.join(HERE, "..", "data", "tokenizer", "spm_synth.gguf")
    vocabs = {"smollm": (gguf_vocab.smollm2_path(), None), "gpt2": (gguf_vocab.smollm2_path(), "gpt-2"),
              "llama-bpe": (gguf_vocab.smollm2_path(), "llama-bpe"), "spm": (spm, None)}
    try:
        vocabs["qwen2"] = (gguf_vocab.qwen_path(), None)
    except FileNotFoundError as e:
        print("skipping qwen2:", e)
    tmp = tempfile.mkdtemp(prefix="swz_fuzz_")
    total_bad = 0
    for name, (src, pre) in vocabs.items():
        path = os.path.join(tmp, name + ".gguf")
        with open(path, "wb") as f:
            f.write(gguf_vocab.vocab_image(src, pre))
        ref = gen.Ref(path)
        for parse in (False, True):
            args = [exe, path] + (["--parse-special"] if parse else []) + ["--hex-lines"]
            res = subprocess.run(args, input="\n".join(t.hex() for t in texts) + "\n", capture_output=True, text=True,
                                 check=True)
            lines = res.stdout.split("\n")
            bad = 0
            for text, line in zip(texts, lines):
                got = [int(x) for x in line.split()]
                want = ref.tokenize(text, False, parse)
                if got != want:
                    bad += 1
                    if bad <= 3:
                        print(f"  {name} parse={parse} {text!r}\n    got  {got}\n    want {want}")
            print(f"{name} parse_special={parse}: {bad} / {len(texts)} differ")
            total_bad += bad
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
