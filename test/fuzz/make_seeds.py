#!/usr/bin/env python3
"""Writes small valid GGUF files (every metadata value type, arrays, tensors of several
types) as the libFuzzer seed corpus, using the PyPI `gguf` package's writer (an
implementation independent of ours). Usage: make_seeds.py OUT_DIR"""
import os
import sys

import numpy as np
import gguf


def write(path, n_tensors, arrays):
    w = gguf.GGUFWriter(path, "llama")
    w.add_uint8("k.u8", 7)
    w.add_int8("k.i8", -7)
    w.add_uint16("k.u16", 700)
    w.add_int16("k.i16", -700)
    w.add_uint32("k.u32", 70000)
    w.add_int32("k.i32", -70000)
    w.add_float32("k.f32", 0.5)
    w.add_uint64("k.u64", 1 << 40)
    w.add_int64("k.i64", -(1 << 40))
    w.add_float64("k.f64", 0.25)
    w.add_bool("k.bool", True)
    w.add_string("k.str", "héllo")
    if arrays:
        w.add_array("k.arr_str", ["a", "bb", ""])
        w.add_array("k.arr_int", [1, 2, 3])
    rng = np.random.default_rng(0)
    for i in range(n_tensors):
        w.add_tensor(f"t{i}", rng.standard_normal((2, 32)).astype(np.float32 if i % 2 == 0 else np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "seed_full.gguf"), 3, True)
    write(os.path.join(out, "seed_kv_only.gguf"), 0, True)
    write(os.path.join(out, "seed_scalars.gguf"), 1, False)
