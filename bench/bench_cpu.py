#!/usr/bin/env python3
"""pp512 / tg128 on the CPU: swizzle (swz-bench over a compiled package) against llama.cpp
(llama-cpp-python's low-level API: llama_decode on the same GGUF), in the same run, same
thread count, medians over repetitions. Definitions as llama-bench: pp<N> = one prompt of N
random tokens from an empty KV cache (batch 512); tg<N> = N single-token decodes from an
empty KV cache, or with --depth D after a D-token prompt (llama-bench's -d, "tg128 @ d2048":
decode with a long context in the cache, what a coding agent's turn looks like). Prints a
table and writes JSON.

Usage: bench_cpu.py [--gguf PATH] [--reps 5] [--threads 2] [--depth 0] [--json out.json]
Needs llama-cpp-python in the venv (pip install llama-cpp-python; not in requirements.txt)."""
import argparse
import ctypes
import datetime
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "parity"))
import models  # noqa: E402


class LlamaCpp:
    """llama.cpp on one GGUF through its C API; run() times one pp and one tg repetition."""

    def __init__(self, gguf, pp, tg, threads, depth=0):
        import llama_cpp as L
        self.L = L
        L.llama_backend_init()
        self.model = L.llama_model_load_from_file(gguf.encode(), L.llama_model_default_params())
        cp = L.llama_context_default_params()
        cp.n_ctx = max(pp, depth + tg) + 16
        cp.n_batch = 512
        cp.n_ubatch = 512
        cp.n_threads = threads
        cp.n_threads_batch = threads
        self.ctx = L.llama_init_from_model(self.model, cp)
        self.mem = L.llama_get_memory(self.ctx)
        n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(self.model))
        rng = random.Random(1)
        self.prompt = [rng.randrange(n_vocab) for _ in range(pp)]
        self.depth_prompt = [rng.randrange(n_vocab) for _ in range(depth)]
        self.pp, self.tg = pp, tg
        self.run()  # warm-up, as swz-bench does

    def prefill(self, tokens):
        L = self.L
        for i in range(0, len(tokens), 512):
            chunk = tokens[i:i + 512]
            arr = (L.llama_token * len(chunk))(*chunk)
            if L.llama_decode(self.ctx, L.llama_batch_get_one(arr, len(chunk))) != 0:
                raise RuntimeError("llama_decode failed")
        L.llama_synchronize(self.ctx)

    def run(self):
        L = self.L
        L.llama_memory_clear(self.mem, True)
        t0 = time.perf_counter()
        self.prefill(self.prompt)
        pp_s = time.perf_counter() - t0
        L.llama_memory_clear(self.mem, True)
        self.prefill(self.depth_prompt)  # untimed: the context the decodes run after
        tok = (L.llama_token * 1)(self.prompt[0])
        t0 = time.perf_counter()
        for i in range(self.tg):
            if L.llama_decode(self.ctx, L.llama_batch_get_one(tok, 1)) != 0:
                raise RuntimeError("llama_decode failed")
            tok[0] = self.prompt[(i + 1) % self.pp]
        L.llama_synchronize(self.ctx)
        return pp_s, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", default=None, help="default: the embedded SmolLM2-135M Q4_1")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--depth", type=int, default=0, help="tg after a prompt of this many tokens (llama-bench -d)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    gguf = args.gguf or models.default_gguf()
    # Repetitions alternate between the two engines, so drift of the machine's speed
    # (large on shared VMs) hits both alike.
    ref = {"pp_seconds": [], "tg_seconds": []}
    swz = {"pp_seconds": [], "tg_seconds": []}
    peer = LlamaCpp(gguf, args.pp, args.tg, args.threads, args.depth)
    with tempfile.TemporaryDirectory() as tmp:
        pkg = os.path.join(tmp, "model.swz")
        subprocess.run([os.path.join(args.build, "compiler", "swizzlec"), "compile", gguf, "--target", "cpu", "-o", pkg],
                       check=True, stdout=subprocess.DEVNULL)
        for _ in range(args.reps):
            out = subprocess.run([os.path.join(args.build, "bench", "swz-bench"), pkg, "--pp", str(args.pp), "--tg",
                                  str(args.tg), "--depth", str(args.depth), "--reps", "1", "-t", str(args.threads)],
                                 check=True, stdout=subprocess.PIPE, text=True)
            one = json.loads(out.stdout)
            swz["pp_seconds"] += one["pp_seconds"]
            swz["tg_seconds"] += one["tg_seconds"]
            pp_s, tg_s = peer.run()
            ref["pp_seconds"].append(pp_s)
            ref["tg_seconds"].append(tg_s)
    for d in (swz, ref):
        d["pp_tok_s"] = args.pp / statistics.median(d["pp_seconds"])
        d["tg_tok_s"] = args.tg / statistics.median(d["tg_seconds"])
    import llama_cpp
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    res = {"date": datetime.date.today().isoformat(), "commit": commit, "machine": f"{platform.machine()} {os.cpu_count()} cores",
           "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
           "gguf": os.path.basename(gguf), "threads": args.threads, "reps": args.reps, "depth": args.depth, "interleaved": True,
           "peer": f"llama-cpp-python {llama_cpp.__version__} (CPU build)", "swizzle": swz, "llama.cpp": ref,
           "ratio_pp": swz["pp_tok_s"] / ref["pp_tok_s"], "ratio_tg": swz["tg_tok_s"] / ref["tg_tok_s"]}
    print(f"| model | test | swizzle tok/s | llama.cpp tok/s | ratio |")
    print(f"|---|---|---|---|---|")
    print(f"| {res['gguf']} | pp{args.pp} | {swz['pp_tok_s']:.1f} | {ref['pp_tok_s']:.1f} | {res['ratio_pp']:.2f}x |")
    tg_name = f"tg{args.tg}" + (f" @ d{args.depth}" if args.depth else "")
    print(f"| {res['gguf']} | {tg_name} | {swz['tg_tok_s']:.1f} | {ref['tg_tok_s']:.1f} | {res['ratio_tg']:.2f}x |")
    path = args.json or os.path.join(ROOT, "bench", "results", f"cpu-{res['date']}-{commit}" + (f"-d{args.depth}" if args.depth else "") + ".json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
