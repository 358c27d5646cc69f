#!/usr/bin/env python3
"""Regenerates the test vectors of test/unit/ggml (small binary files beside this script).

Two independent references:
  * gguf-py (PyPI `gguf`, numpy code written separately from ggml's C):
      dequant_<type>.bin/.f32  random raw blocks and gguf.quants.dequantize of them
      quant_<type>.bin         gguf.quants.quantize of quant_input.f32 (the types gguf-py can
                               quantize: f16 via numpy, bf16, q4_0, q4_1, q5_0, q5_1, q8_0)
  * ggml itself, the C library of llama.cpp (libggml-base/libggml-cpu as built by the PyPI
    package llama-cpp-python), through ctypes — only if it is found (pass --ggml-lib-dir or
    install llama-cpp-python):
      quant_ggml_<type>.bin    quantize_row_<type>_ref of quant_input.f32 (all types, incl.
                               the k-quants, q8_1 and q8_K that gguf-py cannot quantize)
      act_ggml_<type>.bin      the CPU backend's activation quantizer (type_traits_cpu
                               from_float) for q8_0, q8_1, q8_K
      vecdot_ggml_<type>.f32   the CPU backend's vec_dot of quant_ggml_<type> row i with the
                               matching act_ggml row i

Layout: every .f32 is little-endian float32; every .bin is raw ggml blocks, rows back to back.
quant_input.f32 holds N_ROWS rows of N_COLS floats. Run: python3 gen_ggml_vectors.py
"""
import argparse
import ctypes
import glob
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize, quantize

HERE = os.path.dirname(os.path.abspath(__file__))
N_ROWS = 16
N_COLS = 1024  # a multiple of 256 (k-quants)

DEQUANT_TYPES = {  # name -> (type, n_blocks)
    "q4_0": (Q.Q4_0, 64), "q4_1": (Q.Q4_1, 64), "q5_0": (Q.Q5_0, 64), "q5_1": (Q.Q5_1, 64),
    "q8_0": (Q.Q8_0, 64), "q4_K": (Q.Q4_K, 16), "q5_K": (Q.Q5_K, 16), "q6_K": (Q.Q6_K, 16),
    "f16": (Q.F16, 4096), "bf16": (Q.BF16, 4096),
}
GGUF_QUANT_TYPES = {"f16": Q.F16, "bf16": Q.BF16, "q4_0": Q.Q4_0, "q4_1": Q.Q4_1, "q5_0": Q.Q5_0,
                    "q5_1": Q.Q5_1, "q8_0": Q.Q8_0}
GGML_REF_TYPES = {"q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "q8_1": 9,
                  "q4_K": 12, "q5_K": 13, "q6_K": 14, "q8_K": 15}
GGML_ACT_TYPES = {"q8_0": 8, "q8_1": 9, "q8_K": 15}
VEC_DOT = {"q4_0": "q8_0", "q4_1": "q8_1", "q5_0": "q8_0", "q5_1": "q8_1", "q8_0": "q8_0",
           "q4_K": "q8_K", "q5_K": "q8_K", "q6_K": "q8_K"}
BLOCK = {"q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24), "q8_0": (32, 34),
         "q8_1": (32, 36), "q4_K": (256, 144), "q5_K": (256, 176), "q6_K": (256, 210), "q8_K": (256, 292)}


def row_bytes(name, n):
    bs, ts = BLOCK[name]
    return n // bs * ts


def random_halves(rng, n):
    """fp16 scale fields: mostly modest magnitudes of both signs, some zeros and subnormals."""
    v = (rng.standard_normal(n) * 0.02).astype(np.float16)
    v[rng.random(n) < 0.05] = 0
    sub = rng.random(n) < 0.05
    v[sub] = np.float16(3e-6) * rng.integers(1, 16, sub.sum())  # fp16 subnormals
    return v.view(np.uint8).reshape(n, 2)


def random_blocks(rng, name, qtype, n_blocks):
    if name == "f16":
        h = rng.integers(0, 1 << 16, n_blocks, dtype=np.uint16)
        h = h[(h & 0x7C00) != 0x7C00]  # drop inf/NaN (compared separately in C++)
        return h.view(np.uint8)
    if name == "bf16":
        h = rng.integers(0, 1 << 16, n_blocks, dtype=np.uint16)
        h = h[(h & 0x7F80) != 0x7F80]
        return h.view(np.uint8)
    _, ts = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, (n_blocks, ts), dtype=np.uint8)
    if name in ("q4_0", "q5_0", "q8_0"):
        raw[:, 0:2] = random_halves(rng, n_blocks)
    elif name in ("q4_1", "q5_1", "q4_K", "q5_K"):
        raw[:, 0:2] = random_halves(rng, n_blocks)
        raw[:, 2:4] = random_halves(rng, n_blocks)
    elif name == "q6_K":
        raw[:, ts - 2:ts] = random_halves(rng, n_blocks)
    return raw.reshape(-1)


def quant_input(rng):
    rows = []
    for r in range(N_ROWS):
        kind = r % 8
        if kind == 0:
            x = rng.standard_normal(N_COLS)
        elif kind == 1:
            x = rng.standard_normal(N_COLS) * 1e-3
        elif kind == 2:
            x = rng.uniform(-1, 1, N_COLS)
        elif kind == 3:
            x = rng.standard_t(2, N_COLS)  # heavy tails
        elif kind == 4:
            x = np.abs(rng.standard_normal(N_COLS)) + 0.5  # all positive
        elif kind == 5:
            x = -np.abs(rng.standard_normal(N_COLS)) * 30  # all negative, larger
        elif kind == 6:
            x = rng.standard_normal(N_COLS) * 0.02
            x[rng.integers(0, N_COLS, 4)] = 5.0  # outliers
        else:
            x = rng.standard_normal(N_COLS) * 1e4
        x = x.astype(np.float32)
        if r == 3:
            x[0:256] = 0.0  # an all-zero super-block
        if r == 4:
            x[256:512] = 0.75  # a constant super-block
        if r == 6:
            x[32:64] = 1e-30  # tiny values (denormal scales)
        rows.append(x)
    return np.stack(rows).astype(np.float32)


def find_ggml(lib_dir):
    cands = []
    if lib_dir:
        cands.append(lib_dir)
    try:
        import llama_cpp  # noqa: F401
        cands.append(os.path.join(os.path.dirname(llama_cpp.__file__), "lib"))
    except Exception:
        pass
    for d in cands:
        base = glob.glob(os.path.join(d, "libggml-base.so*"))
        cpu = glob.glob(os.path.join(d, "libggml-cpu.so*"))
        if base and cpu:
            return ctypes.CDLL(sorted(base)[0], mode=ctypes.RTLD_GLOBAL), ctypes.CDLL(sorted(cpu)[0])
    return None, None


class TraitsCpu(ctypes.Structure):
    _fields_ = [("from_float", ctypes.c_void_p), ("vec_dot", ctypes.c_void_p),
                ("vec_dot_type", ctypes.c_int), ("nrows", ctypes.c_int64)]


FROM_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
VEC_DOT_FN = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.POINTER(ctypes.c_float), ctypes.c_size_t, ctypes.c_void_p,
                              ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ggml-lib-dir", help="folder with libggml-base.so and libggml-cpu.so")
    args = ap.parse_args()
    rng = np.random.default_rng(20251129)

    for name, (qt, nb) in DEQUANT_TYPES.items():
        raw = random_blocks(rng, name, qt, nb)
        ref = dequantize(raw, qt).astype(np.float32).reshape(-1)
        raw.tofile(os.path.join(HERE, f"dequant_{name}.bin"))
        ref.tofile(os.path.join(HERE, f"dequant_{name}.f32"))

    x = quant_input(rng)
    x.tofile(os.path.join(HERE, "quant_input.f32"))
    for name, qt in GGUF_QUANT_TYPES.items():
        if qt == Q.F16:
            q = x.astype(np.float16).view(np.uint8)
        else:
            q = quantize(x, qt)
        np.ascontiguousarray(q).tofile(os.path.join(HERE, f"quant_{name}.bin"))

    base, cpu = find_ggml(args.ggml_lib_dir)
    if base is None:
        print("ggml libraries not found: kept the existing quant_ggml_*/act_ggml_*/vecdot_ggml_* files", file=sys.stderr)
        return
    cpu.ggml_cpu_init()
    cpu.ggml_get_type_traits_cpu.restype = ctypes.POINTER(TraitsCpu)
    xp = x.ctypes.data_as(ctypes.c_void_p)
    wq = {}
    for name, tid in GGML_REF_TYPES.items():
        fn = getattr(base, f"quantize_row_{name}_ref")
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        buf = ctypes.create_string_buffer(row_bytes(name, N_COLS) * N_ROWS)
        fn(xp, buf, N_ROWS * N_COLS)
        wq[name] = buf.raw
        open(os.path.join(HERE, f"quant_ggml_{name}.bin"), "wb").write(buf.raw)
    act = {}
    for name, tid in GGML_ACT_TYPES.items():
        tr = cpu.ggml_get_type_traits_cpu(tid).contents
        buf = ctypes.create_string_buffer(row_bytes(name, N_COLS) * N_ROWS)
        FROM_FLOAT(tr.from_float)(xp, buf, N_ROWS * N_COLS)
        act[name] = buf.raw
        open(os.path.join(HERE, f"act_ggml_{name}.bin"), "wb").write(buf.raw)
    for wname, aname in VEC_DOT.items():
        tr = cpu.ggml_get_type_traits_cpu(GGML_REF_TYPES[wname]).contents
        fn = VEC_DOT_FN(tr.vec_dot)
        wrb, arb = row_bytes(wname, N_COLS), row_bytes(aname, N_COLS)
        out = np.zeros(N_ROWS, dtype=np.float32)
        for r in range(N_ROWS):
            wbuf = ctypes.create_string_buffer(wq[wname][r * wrb:(r + 1) * wrb], wrb)
            abuf = ctypes.create_string_buffer(act[aname][r * arb:(r + 1) * arb], arb)
            s = ctypes.c_float(0)
            fn(N_COLS, ctypes.byref(s), 0, wbuf, 0, abuf, 0, 1)
            out[r] = s.value
        out.tofile(os.path.join(HERE, f"vecdot_ggml_{wname}.f32"))
    print("wrote gguf-py and ggml vectors to", HERE)


if __name__ == "__main__":
    main()
