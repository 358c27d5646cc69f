#!/usr/bin/env python3
"""Writes test/data/parity/smollm2-logprobs.json with llama.cpp (llama-cpp-python, CPU):
the reference for test/python/test_openai_logprobs.py, which CI checks without llama.cpp.

For TEXT (tokenized by llama.cpp) it records log-softmax values in float64 of llama.cpp's
logits, the way each side of the server computes them:
  - "prompt": the whole text evaluated in one batch (prompt rows: what /v1/completions
    echo + logprobs reports), for every position i >= 1: the logprob of token i and the
    TOP most likely ids of row i - 1;
  - "decode": the first N_PROMPT tokens as a prompt, then greedy decoding one token per
    eval (generated rows: what generated tokens' logprobs report) for N_DECODE tokens.
llama.cpp reduces attention in a different order for a batch than for a single row, so
the two sides differ slightly (here by up to ~0.1 nat at a "\\n\\n" position); the server
reproduces each.

Usage: .venv/bin/python test/parity/gen_logprobs_reference.py
Needs `pip install llama-cpp-python` in the venv (not in requirements.txt)."""
import hashlib
import json
import pathlib

import llama_cpp
import numpy as np

import models

TEXT = "The capital of France is Paris.\n\nThe United States"
N_PROMPT = 5   # "The capital of France is"
N_DECODE = 8
TOP = 5
OUT = pathlib.Path(__file__).resolve().parents[1] / "data" / "parity" / "smollm2-logprobs.json"


def log_softmax(row):
    x = np.asarray(row, dtype=np.float64)
    x = x - x.max()
    return x - np.log(np.exp(x).sum())


def top(ls):
    ids = sorted(range(len(ls)), key=lambda i: (-ls[i], i))[:TOP]
    return [[int(i), float(ls[i])] for i in ids]


def main():
    gguf = models.default_gguf()
    m = llama_cpp.Llama(model_path=gguf, n_ctx=256, n_threads=2, logits_all=True, verbose=False)
    toks = m.tokenize(TEXT.encode(), add_bos=True, special=False)
    m.eval(toks)
    prompt = []
    for i in range(1, len(toks)):
        ls = log_softmax(m.scores[i - 1])
        prompt.append({"token": toks[i], "logprob": float(ls[toks[i]]), "top": top(ls)})
    m.reset()
    m.eval(toks[:N_PROMPT])
    decode = []
    for _ in range(N_DECODE):
        ls = log_softmax(m.scores[m.n_tokens - 1])
        t = int(np.argmax(ls))
        decode.append({"token": t, "logprob": float(ls[t]), "top": top(ls)})
        m.eval([t])
    sha = hashlib.sha256(pathlib.Path(gguf).read_bytes()).hexdigest()
    OUT.write_text(json.dumps({"gguf_sha256": sha, "text": TEXT, "tokens": toks, "n_prompt": N_PROMPT,
                               "top": TOP, "prompt": prompt, "decode": decode,
                               "llama_cpp_python": llama_cpp.__version__}, indent=1) + "\n")
    print(OUT)


if __name__ == "__main__":
    main()
