#!/usr/bin/env python3
"""Concurrency benchmark (issue 14 item 6): `swizzle-rt serve --parallel N` against llama.cpp's
server (llama-cpp-python's `python -m llama_cpp.server`) on the same GGUF, same machine, same
run, servers alternating round by round.

1. Throughput and TTFT at 1, 2, 4, 8, 16 concurrent streams: N streamed, greedy chat
   completions sent at once (each prompt starts with a unique marker, so no prefix cache
   helps), max_tokens per model. Aggregate tok/s = all generated tokens of the round /
   the round's wall time (first request sent to last stream finished; the short prompts'
   prefill included). TTFT = request sent to first content token, client side; p50/p99
   over every request of every repetition. The aggregate is the median over --reps rounds.
2. Inter-token latency while a long prompt arrives: 4 streams generate; once they all
   produce tokens (or 3 s after the first did), one request with a ~3,000-token prompt
   (max_tokens 1) arrives. Reported: p50/p99/max of the 4 streams' gaps between
   consecutive tokens that overlap the window from the long request's send to its first
   token, and the long prompt's TTFT. Swizzle runs it with chunked prefill
   (--batch-tokens 64, and the default 512) and without (--batch-tokens 4096 >= the
   prompt: the whole prompt in one step). Swizzle's streams ask for many tokens and hang
   up 1 s after the long prompt's first token; llama.cpp's ask for few (itl_peer_max_tokens:
   it runs them one after another before the long prompt, see below).

llama-cpp-python's server holds one llama.cpp context behind a lock: it serves ONE request
at a time (no parallel slots: its settings have no n_parallel / slots option; requests wait
for the lock in arrival order; --interrupt_requests False so a new request waits instead of
cutting the running stream short). So its N-stream numbers are N requests served one after
another, and in part 2 the long prompt waits behind the 4 streams (their ITL is its plain
decode latency). The output says so. llama.cpp's own C++ `llama-server --parallel` (real
slots, continuous batching) is not built here: llama-cpp-python installs the library only.

Setup (once; bench-only, not in requirements.txt; builds llama.cpp from source):
  CMAKE_ARGS="-DGGML_NATIVE=ON" .venv/bin/pip install llama-cpp-python uvicorn fastapi \\
      pydantic-settings sse-starlette 'starlette-context>=0.3.6,<0.4' PyYAML

Usage:
  .venv/bin/python bench/bench_concurrency.py [--models smollm2,qwen] [--streams 1,2,4,8,16]
      [--reps 2] [--threads 2] [--itl-models smollm2] [--itl-batch-tokens 64,512,4096]
      [--build DIR] [--no-peer] [--json OUT]     (--streams '' runs part 2 only)
Models: smollm2 (the default SmolLM2-135M-Instruct Q4_1; package build/models/smollm2.swz
or --smollm2-package), qwen (.venv/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf; compiled
with --build's swizzlec into a temp dir unless --qwen-package). Prints markdown tables and
writes JSON to bench/results/concurrency-<date>-<commit>.json.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "parity"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import models  # noqa: E402
from bench_prefix_cache import Proc, free_port  # noqa: E402

TOPICS = ["a lighthouse keeper", "a robot learning to paint", "a dragon who collects teacups", "a city under the sea",
          "a detective in a library", "a train that never stops", "two rival bakers", "a lost astronaut",
          "a clockmaker's apprentice", "a garden on Mars", "a talking cat", "a pirate who fears water",
          "an old map", "a winter festival", "a haunted violin", "a chess tournament"]
PEER_NOTE = ("llama_cpp.server (llama-cpp-python) serves one request at a time (one context behind a lock, no "
             "parallel slots): its N-stream rounds run the N requests one after another")


_FIRST_HOOK = None


def percentile(xs, q):
    xs = sorted(xs)
    if not xs:
        return None
    k = (len(xs) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def round_of(base: str, n: int, max_tokens: int):
    t_ref = time.perf_counter()
    prompts = [f"[{uuid.uuid4().hex[:8]}] Write a long story about {TOPICS[i % len(TOPICS)]}." for i in range(n)]
    with cf.ThreadPoolExecutor(n) as ex:
        res = list(ex.map(lambda p: stream_chat(base, p, max_tokens, t_ref), prompts))
    wall = max(r["done"] for r in res)
    toks = sum(len(r["tokens"]) for r in res)
    return {"wall_s": wall, "tokens": toks, "tok_s": toks / wall, "ttft_s": [r["ttft_s"] for r in res if r["ttft_s"]]}


def long_prompt_text(base_tok: str | None, target: int) -> str:
    """~target tokens of code-like text (counted with swizzle's /tokenize when given)."""
    lines = []
    i = 0
    while True:
        lines.append(f"def handler_{i}(request, value={i * 7 % 97}):\n    # step {i}: validate, transform and store\n"
                     f"    if value > {i % 13}:\n        return store(request, value * {i % 5 + 2})\n    return None\n")
        i += 1
        if i % 4 == 0:
            text = "Review this file:\n" + "".join(lines)
            n = (len(requests.post(base_tok + "/tokenize", json={"content": text}, timeout=60).json()["tokens"])
                 if base_tok else len(text) // 3)
            if n >= target:
                return text


def itl_run(base: str, long_text: str, max_tokens: int, n_streams: int = 4):
    """Part 2 on one server; the streams hang up 1 s after the long prompt's first token
    (or end at max_tokens)."""
    t_ref = time.perf_counter()
    started = threading.Event()
    stop = threading.Event()
    results = [None] * n_streams
    first_times = []

    def streamer(i):
        results[i] = stream_chat(base, f"[{uuid.uuid4().hex[:8]}] Write a long story about {TOPICS[i]}.", max_tokens, t_ref, stop)

    threads = [threading.Thread(target=streamer, args=(i,)) for i in range(n_streams)]
    global _FIRST_HOOK
    lock = threading.Lock()

    def hook():
        with lock:
            first_times.append(time.perf_counter())
            if len(first_times) >= n_streams:
                started.set()

    _FIRST_HOOK = hook
    for t in threads:
        t.start()
    # Wait for all streams' first tokens, or 3 s after the first one (a server that runs
    # one request at a time starts only one).
    deadline = time.perf_counter() + 600
    while not started.is_set() and time.perf_counter() < deadline:
        with lock:
            if first_times and time.perf_counter() - first_times[0] > 3.0:
                break
        time.sleep(0.01)
    time.sleep(0.3)  # a few gaps before the long prompt arrives
    long = stream_chat(base, f"[{uuid.uuid4().hex[:8]}] " + long_text, 1, t_ref)
    time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join()
    _FIRST_HOOK = None
    w0, w1 = long["sent"], long["tokens"][0] if long["tokens"] else long["done"]
    gaps_win, gaps_all = [], []
    for r in results:
        ts = r["tokens"]
        for a, b in zip(ts, ts[1:]):
            gaps_all.append(b - a)
            if b >= w0 and a <= w1:  # the gap overlaps the long prompt's window
                gaps_win.append(b - a)
    return {"long_ttft_s": long["ttft_s"], "window_s": w1 - w0, "streams_started_before_long": len(first_times),
            "itl_window_p50_s": percentile(gaps_win, 50), "itl_window_p99_s": percentile(gaps_win, 99),
            "itl_window_max_s": max(gaps_win) if gaps_win else None, "gaps_in_window": len(gaps_win),
            "itl_all_p50_s": percentile(gaps_all, 50), "itl_all_p99_s": percentile(gaps_all, 99),
            "stream_tokens": [len(r["tokens"]) for r in results]}


def stream_chat(base: str, content: str, max_tokens: int, t_ref: float, stop: threading.Event | None = None):
    """One streamed greedy chat completion; token arrival times (seconds since t_ref), one
    content chunk per token on both servers. _FIRST_HOOK (part 2) is called at the first
    token; the client hangs up once `stop` is set."""
    body = {"model": "bench", "messages": [{"role": "user", "content": content}], "temperature": 0,
            "max_tokens": max_tokens, "stream": True}
    t0 = time.perf_counter()
    times = []
    hook = _FIRST_HOOK
    with requests.post(base + "/v1/chat/completions", json=body, stream=True, timeout=3600) as r:
        if r.status_code != 200:
            raise RuntimeError(f"{base}: HTTP {r.status_code}: {r.text[:500]}")
        buf = b""
        for chunk in r.iter_content(chunk_size=None):  # as the bytes arrive
            now = time.perf_counter()
            if stop is not None and stop.is_set():
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                line = line.strip()
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                ev = json.loads(line[6:])
                if "error" in ev:
                    raise RuntimeError(f"{base}: stream error {ev['error']}")
                for ch in ev.get("choices") or []:
                    if (ch.get("delta") or {}).get("content"):
                        if not times and hook and max_tokens > 1:
                            hook()
                        times.append(now - t_ref)
    t1 = time.perf_counter()
    return {"sent": t0 - t_ref, "done": t1 - t_ref, "tokens": times,
            "ttft_s": (times[0] - (t0 - t_ref)) if times else None}


MODELS = {
    "smollm2": {"gguf": None, "max_tokens": 32, "itl_max_tokens": 1500, "itl_peer_max_tokens": 48},
    "qwen": {"gguf": os.path.join(ROOT, ".venv", "models", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
             "max_tokens": 16, "itl_max_tokens": 800, "itl_peer_max_tokens": 24},
}


def start_swizzle(build, pkg, ctx, threads, *extra):
    port = free_port()
    p = Proc([os.path.join(build, "server", "swizzle-rt"), "serve", pkg, "--host", "127.0.0.1", "--port", str(port),
              "-c", str(ctx), "-t", str(threads), "-q", *extra], "swizzle")
    p.base = f"http://127.0.0.1:{port}"
    p.wait_ready(p.base + "/health")
    return p


def start_llama(gguf, ctx, threads):
    port = free_port()
    p = Proc([sys.executable, os.path.join(ROOT, "bench", "llama_server_noamx.py"), "--model", gguf, "--n_ctx", str(ctx), "--n_threads", str(threads),
              "--n_threads_batch", str(threads), "--n_batch", "512", "--interrupt_requests", "False",
              "--host", "127.0.0.1", "--port", str(port)], "llama.cpp")
    p.base = f"http://127.0.0.1:{port}"
    p.wait_ready(p.base + "/v1/models")
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="smollm2,qwen")
    ap.add_argument("--streams", default="1,2,4,8,16")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--itl-models", default="smollm2", help="models of part 2 ('' = none)")
    ap.add_argument("--long-tokens", type=int, default=3000)
    ap.add_argument("--itl-batch-tokens", default="64,512,4096",
                    help="swizzle's --batch-tokens for part 2, one run each (>= the prompt: unchunked)")
    ap.add_argument("--parallel", type=int, default=16)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--smollm2-package", default=None)
    ap.add_argument("--qwen-package", default=None)
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    streams = [int(x) for x in args.streams.split(",") if x]
    MODELS["smollm2"]["gguf"] = models.default_gguf()
    tmp = tempfile.mkdtemp(prefix="bench-conc-")
    out = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "commit": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True).stdout.strip(),
           "machine": f"{platform.machine()} {os.cpu_count()} cores", "loadavg_start": os.getloadavg(),
           "threads": args.threads, "ctx": args.ctx, "parallel": args.parallel, "reps": args.reps,
           "peer_note": PEER_NOTE, "models": {}}
    print(f"note: {PEER_NOTE}", file=sys.stderr)
    try:
        import importlib.metadata
        out["llama_cpp_python"] = importlib.metadata.version("llama_cpp_python")
    except Exception:  # noqa: BLE001
        out["llama_cpp_python"] = None
    for name in args.models.split(","):
        cfg = MODELS[name]
        gguf = cfg["gguf"]
        pkg = getattr(args, f"{name}_package")
        if name == "smollm2" and not pkg and os.path.isdir(os.path.join(args.build, "models", "smollm2.swz")):
            pkg = os.path.join(args.build, "models", "smollm2.swz")
        if not pkg:
            pkg = os.path.join(tmp, f"{name}.swz")
            subprocess.run([os.path.join(args.build, "compiler", "swizzlec"), "compile", gguf, "--target", "cpu", "-o", pkg],
                           check=True, stdout=subprocess.DEVNULL)
        res = {"gguf": gguf, "package": pkg, "max_tokens": cfg["max_tokens"], "throughput": {}, "itl": {}}
        out["models"][name] = res
        servers = {}
        try:
            servers["swizzle"] = start_swizzle(args.build, pkg, args.ctx, args.threads, "--parallel", str(args.parallel))
            if not args.no_peer:
                servers["llama.cpp"] = start_llama(gguf, args.ctx, args.threads)
            for srv in servers.values() if streams else []:  # warm-up (page faults, first allocations)
                round_of(srv.base, 2, 8)
            for n in streams:
                rows = {s: [] for s in servers}
                for rep in range(args.reps):
                    for s, srv in servers.items():
                        rows[s].append(round_of(srv.base, n, cfg["max_tokens"]))
                        print(f"{name} n={n} rep {rep} {s}: {rows[s][-1]['tok_s']:.1f} tok/s, "
                              f"{rows[s][-1]['tokens']} tokens in {rows[s][-1]['wall_s']:.2f}s", file=sys.stderr)
                res["throughput"][n] = {}
                for s, rs in rows.items():
                    ttfts = [t for r in rs for t in r["ttft_s"]]
                    res["throughput"][n][s] = {"tok_s_median": statistics.median(r["tok_s"] for r in rs),
                                               "tok_s": [r["tok_s"] for r in rs], "tokens": [r["tokens"] for r in rs],
                                               "ttft_p50_s": percentile(ttfts, 50), "ttft_p99_s": percentile(ttfts, 99)}
            if name in args.itl_models.split(","):
                long_text = long_prompt_text(servers["swizzle"].base, args.long_tokens)
                n_long = len(requests.post(servers["swizzle"].base + "/tokenize", json={"content": long_text},
                                           timeout=60).json()["tokens"])
                res["long_prompt_tokens"] = n_long
                servers["swizzle"].stop()
                del servers["swizzle"]
                configs = [(f"swizzle bt={bt} ({'unchunked' if int(bt) >= n_long else 'chunked'}"
                            f"{', default' if bt == '512' else ''})", ["--batch-tokens", bt])
                           for bt in args.itl_batch_tokens.split(",")]
                for label, extra in configs:
                    srv = start_swizzle(args.build, pkg, args.ctx, args.threads, "--parallel", str(args.parallel), *extra)
                    try:
                        round_of(srv.base, 2, 8)
                        res["itl"][label] = itl_run(srv.base, long_text, cfg["itl_max_tokens"])
                    finally:
                        srv.stop()
                    print(f"{name} itl {label}: {res['itl'][label]}", file=sys.stderr)
                if "llama.cpp" in servers:
                    res["itl"]["llama.cpp (serial)"] = itl_run(servers["llama.cpp"].base, long_text, cfg["itl_peer_max_tokens"])
                    print(f"{name} itl llama.cpp: {res['itl']['llama.cpp (serial)']}", file=sys.stderr)
        finally:
            for srv in servers.values():
                srv.stop()
    out["loadavg_end"] = os.getloadavg()

    for name, res in out["models"].items():
        print(f"\n### {name} ({os.path.basename(res['gguf'])}), max_tokens {res['max_tokens']}, {args.threads} threads\n")
        peer = any("llama.cpp" in v for v in res["throughput"].values())
        if not res["throughput"]:
            print("(no throughput rounds: --streams '')")
        print("| streams | swizzle tok/s | swizzle TTFT p50 / p99 s |" +
              (" llama.cpp tok/s | llama.cpp TTFT p50 / p99 s | tok/s ratio | TTFT p99 ratio (llama/swz) |" if peer else ""))
        print("|---|---|---|" + ("---|---|---|---|" if peer else ""))
        for n, v in res["throughput"].items():
            sw = v["swizzle"]
            line = f"| {n} | {sw['tok_s_median']:.1f} | {sw['ttft_p50_s']:.3f} / {sw['ttft_p99_s']:.3f} |"
            if peer:
                lc = v["llama.cpp"]
                line += (f" {lc['tok_s_median']:.1f} | {lc['ttft_p50_s']:.3f} / {lc['ttft_p99_s']:.3f} |"
                         f" {sw['tok_s_median'] / lc['tok_s_median']:.2f}x | {lc['ttft_p99_s'] / sw['ttft_p99_s']:.2f}x |")
            print(line)
        if res["itl"]:
            print(f"\nITL of 4 streams while a {res.get('long_prompt_tokens')}-token prompt arrives:\n")
            print("| server | ITL p50 / p99 / max in window ms | gaps | window s | long TTFT s | ITL p50 / p99 whole run ms |")
            print("|---|---|---|---|---|---|")
            for label, r in res["itl"].items():
                f = lambda x: f"{x * 1000:.1f}" if x is not None else "-"  # noqa: E731
                print(f"| {label} | {f(r['itl_window_p50_s'])} / {f(r['itl_window_p99_s'])} / {f(r['itl_window_max_s'])} |"
                      f" {r['gaps_in_window']} | {r['window_s']:.2f} | {r['long_ttft_s']:.2f} |"
                      f" {f(r['itl_all_p50_s'])} / {f(r['itl_all_p99_s'])} |")
    print(f"\nnote: {PEER_NOTE}")
    path = args.json or os.path.join(ROOT, "bench", "results",
                                     f"concurrency-{out['date'][:10]}-{out['commit']}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
