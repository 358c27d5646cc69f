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
    llm = llama_cpp.Llama(model_path=gguf_path, n_ctx=512, n_batch=512, n_threads=2, flash_attn=False,
                          verbose=False, seed=0)
    out = []
    for p in models.PROMPTS:
        toks = llm.tokenize(p["text"].encode(), add_bos=True, special=p["special"])
        llm.reset()
        llm.eval(toks)
        logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        order = np.argsort(-logits, kind="stable")
        ids = sorted(set(order[:256].tolist()) | set(range(0, len(logits), 97)))
        greedy = []
        cur = logits
        for i in range(models.N_PREDICT):
            t = int(np.argmax(cur))
            greedy.append(t)
            if i + 1 < models.N_PREDICT:
                llm.eval([t])
                cur = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        # margin between the top two logits at each greedy step tells how robust the match is
        out.append({"text": p["text"], "special": p["special"], "prompt_tokens": toks, "greedy": greedy,
                    "logit_ids": ids, "logit_values": [float(logits[i]) for i in ids]})
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
