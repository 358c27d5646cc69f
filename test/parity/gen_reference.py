#!/usr/bin/env python3
"""Regenerates test/data/parity/<model>.json with llama.cpp (llama-cpp-python, CPU build):
for each prompt of models.PROMPTS, llama.cpp's prompt tokens, its greedy continuation of
N_PREDICT tokens (argmax, lowest id on ties, not stopping at end-of-generation) and its
logits at the last prompt position (the top 256 ids plus every 97th id).

Usage: gen_reference.py --swizzlec build/compiler/swizzlec [--only NAME]
Needs `pip install llama-cpp-python` in the venv (not part of requirements.txt: CI reads
the committed JSON instead of building llama.cpp)."""
import argparse
import json
import os
import tempfile

import llama_cpp
import numpy as np

import models


def reference(gguf_path):
    """llama.cpp through its C API (llama_decode, llama_get_logits_ith), flash attention off."""
    L = llama_cpp
    L.llama_backend_init()
    model = L.llama_model_load_from_file(gguf_path.encode(), L.llama_model_default_params())
    vocab = L.llama_model_get_vocab(model)
    n_vocab = L.llama_vocab_n_tokens(vocab)
    cp = L.llama_context_default_params()
    cp.n_ctx = 512
    cp.n_batch = 512
    cp.n_ubatch = 512
    cp.n_threads = cp.n_threads_batch = 2
    cp.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_DISABLED
    ctx = L.llama_init_from_model(model, cp)
    mem = L.llama_get_memory(ctx)

    def decode(tokens):
        arr = (L.llama_token * len(tokens))(*tokens)
        if L.llama_decode(ctx, L.llama_batch_get_one(arr, len(tokens))) != 0:
            raise RuntimeError("llama_decode failed")
        ptr = L.llama_get_logits_ith(ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(n_vocab,)).astype(np.float32).copy()

    def tokenize(text, special):
        raw = text.encode()
        buf = (L.llama_token * (len(raw) + 8))()
        n = L.llama_tokenize(vocab, raw, len(raw), buf, len(buf), True, special)
        if n < 0:
            raise RuntimeError("tokenize failed")
        return list(buf[:n])

    out = []
    for p in models.PROMPTS:
        toks = tokenize(p["text"], p["special"])
        L.llama_memory_clear(mem, True)
        logits = decode(toks)
        order = np.argsort(-logits, kind="stable")
        ids = sorted(set(order[:256].tolist()) | set(range(0, n_vocab, 97)))
        greedy, margins = [], []
        cur = logits
        for i in range(models.N_PREDICT):
            top2 = np.sort(cur)[-2:]
            margins.append(float(top2[1] - top2[0]))
            t = int(np.argmax(cur))  # first maximum = lowest id on ties
            greedy.append(t)
            if i + 1 < models.N_PREDICT:
                cur = decode([t])
        out.append({"text": p["text"], "special": p["special"], "prompt_tokens": toks, "greedy": greedy,
                    "greedy_top2_margin": margins,
                    "logit_ids": ids, "logit_values": [float(logits[i]) for i in ids]})
    L.llama_free(ctx)
    L.llama_model_free(model)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--swizzlec", required=True)
    ap.add_argument("--only")
    args = ap.parse_args()
    here = os.path.join(models.ROOT, "test", "data", "parity")
    os.makedirs(here, exist_ok=True)
    names = [*models.REAL, *models.SYNTH]
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            if args.only and name != args.only:
                continue
            path = models.real_gguf(name) if name in models.REAL else models.synth_gguf(name, args.swizzlec, tmp)
            rec = {"model": name, "gguf_sha256": models.sha256(path),
                   "synth_args": models.SYNTH.get(name), "n_predict": models.N_PREDICT,
                   "generator": f"llama-cpp-python {llama_cpp.__version__} (CPU), flash_attn off, n_batch 512",
                   "prompts": reference(path)}
            with open(os.path.join(here, name + ".json"), "w") as f:
                json.dump(rec, f, indent=0, ensure_ascii=False)
            print(f"wrote {name}.json ({len(rec['prompts'])} prompts)")


if __name__ == "__main__":
    main()
