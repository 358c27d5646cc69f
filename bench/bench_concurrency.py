#!/usr/bin/env python3
"""Concurrency benchmark (issue 14 item 6): `swizzle-rt serve --parallel N` against llama.cpp's
server on the same GGUF, same machine, same run, servers alternating round by round. The
peer is llama.cpp's C++ `llama-server --parallel N` (real slots, continuous batching; built
from the llama.cpp that the newest llama-cpp-python sdist vendors, `--llama-server BIN`)
or, without one, llama-cpp-python's `python -m llama_cpp.server` (one request at a time).

1. Throughput and TTFT at 1, 2, 4, 8, 16 concurrent streams: N streamed, greedy chat
   completions sent at once (each request's unique marker opens its own system message,
   --marker, so no prefix cache helps either server), max_tokens per model. Aggregate tok/s = all generated tokens of the round /
   the round's wall time (first request sent to last stream finished; the short prompts'
   prefill included). TTFT = request sent to first content token, client side; p50/p99
   over every request of every repetition. The aggregate is the median over --reps rounds.
2. Inter-token latency while a long prompt arrives: --itl-streams streams (4) generate;
   once they all produce tokens (or 3 s after the first did), one request with a
   --long-tokens prompt (~3,000 tokens; max_tokens 1) arrives. Reported: p50/p99/max of
   the streams' gaps between consecutive tokens that overlap the window from the long
   request's send to its first token, and the long prompt's TTFT. Swizzle runs it with
   each --itl-batch-tokens budget (chunked prefill: 64 and the default 256; >= the
   prompt: the whole prompt in one step); llama-server at its defaults (-b 2048 -ub 512:
   up to 2,048 prompt tokens a step beside the decoding slots) and with -b/-ub equal to
   the smallest swizzle budget. The streams ask for many tokens and hang up 1 s after
   the long prompt's first token.

llama-cpp-python's server (the fallback peer) holds one llama.cpp context behind a lock:
it serves ONE request at a time (requests wait in arrival order; --interrupt_requests
False), so its N-stream numbers are N requests served one after another and in part 2
the long prompt waits behind the streams (which then ask for few tokens,
itl_peer_max_tokens). The output says which peer ran.

Peers (bench-only, not in requirements.txt; both build llama.cpp from source):
  llama-server: pip download --no-deps --no-binary :all: llama-cpp-python; in its
      vendor/llama.cpp: cmake -B b -G Ninja -DCMAKE_BUILD_TYPE=Release [-DGGML_CUDA=ON
      -DCMAKE_CUDA_ARCHITECTURES=90] (this VM: -DGGML_NATIVE=OFF with AVX2/AVX-512 on and
      -DGGML_AMX_TILE=OFF: it kills AMX with SIGILL); cmake --build b --target llama-server
  llama_cpp.server: CMAKE_ARGS="-DGGML_NATIVE=ON" .venv/bin/pip install llama-cpp-python
      uvicorn fastapi pydantic-settings sse-starlette 'starlette-context>=0.3.6,<0.4' PyYAML

Usage:
  .venv/bin/python bench/bench_concurrency.py [--models smollm2,qwen] [--streams 1,2,4,8,16]
      [--reps 2] [--threads 2] [--itl-models smollm2] [--itl-batch-tokens 64,256,4096]
      [--llama-server BIN] [--build DIR] [--no-peer] [--json OUT]   (--streams '': part 2 only)
  GPU (`bench/gpu_speed.sh run build concurrency` runs it on the lent H200): --gpu --models custom
      --gguf F --package P (an sm_90 package) --max-tokens N --itl-max-tokens N
      --itl-streams 32 --long-tokens 32000 ...
Models: smollm2 (the default SmolLM2-135M-Instruct Q4_1; package build/models/smollm2.swz
or --smollm2-package), qwen (.venv/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf; compiled
with --build's swizzlec into a temp dir unless --qwen-package), custom (--gguf, --package).
Prints markdown tables and writes JSON to bench/results/concurrency-<date>-<commit>.json.
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
SERIAL_NOTE = ("llama_cpp.server (llama-cpp-python) serves one request at a time (one context behind a lock, no "
               "parallel slots): its N-stream rounds run the N requests one after another")
SLOTS_NOTE = ("llama-server --parallel {np} --kv-unified -c {c} (llama.cpp's C++ server: slots decoded together, "
              "prompt tokens batched beside them{gpu})")


_FIRST_HOOK = None
IGNORE_EOS = False  # --ignore-eos: every request asks both servers not to stop at an EOG token
# --marker: where a request's unique marker goes. "system" (default): a system message of
# its own, so the marker is the first thing after the template's first tokens and no
# server can reuse a cached prefix of another request. "user": at the start of the user
# message, as before 2026-12-03 — Qwen's and SmolLM2's templates then put their default
# system prompt (~20-30 tokens) in front of it, which llama-server reuses from its slot's
# previous request (token-granular prompt cache) and swizzle's 64-token blocks do not.
MARKER_IN = "system"


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
        results[i] = stream_chat(base, f"[{uuid.uuid4().hex[:8]}] Write a long story about {TOPICS[i % len(TOPICS)]}.",
                                 max_tokens, t_ref, stop)

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
    messages = [{"role": "user", "content": content}]
    if MARKER_IN == "system" and content.startswith("[") and "] " in content:
        marker, rest = content.split("] ", 1)
        messages = [{"role": "system", "content": marker + "] You are a helpful assistant."},
                    {"role": "user", "content": rest}]
    body = {"model": "bench", "messages": messages, "temperature": 0, "max_tokens": max_tokens, "stream": True}
    if IGNORE_EOS:
        body["ignore_eos"] = True
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
    "custom": {"gguf": None, "max_tokens": 64, "itl_max_tokens": 2000, "itl_peer_max_tokens": 64},
}


def start_swizzle(rt, pkg, ctx, threads, *extra):
    port = free_port()
    p = Proc([rt, "serve", pkg, "--host", "127.0.0.1", "--port", str(port),
              "-c", str(ctx), "-t", str(threads), "-q", *extra], "swizzle")
    p.base = f"http://127.0.0.1:{port}"
    p.wait_ready(p.base + "/health")
    return p


def start_llama(gguf, ctx, threads):
    """The fallback peer: llama-cpp-python's server (one request at a time)."""
    port = free_port()
    p = Proc([sys.executable, os.path.join(ROOT, "bench", "llama_server_noamx.py"), "--model", gguf, "--n_ctx", str(ctx), "--n_threads", str(threads),
              "--n_threads_batch", str(threads), "--n_batch", "512", "--interrupt_requests", "False",
              "--host", "127.0.0.1", "--port", str(port)], "llama.cpp")
    p.base = f"http://127.0.0.1:{port}"
    p.wait_ready(p.base + "/v1/models")
    return p


def llama_server_argv(binary, gguf, ctx_total, parallel, threads, gpu, *extra):
    """llama-server with `parallel` slots sharing one KV pool of ctx_total tokens (as swizzle's
    --kv-pages pool is shared), flash attention and every layer on the GPU with --gpu."""
    argv = [binary, "-m", gguf, "--host", "127.0.0.1", "-c", str(ctx_total), "-np", str(parallel), "--kv-unified",
            "-t", str(threads), "-tb", str(threads), "--no-webui", "--temp", "0"]
    argv += ["-ngl", "99", "-fa", "on"] if gpu else ["-ngl", "0"]
    return argv + list(extra)


def start_llama_server(argv):
    port = free_port()
    p = Proc(argv + ["--port", str(port)], "llama-server")
    p.base = f"http://127.0.0.1:{port}"
    p.wait_ready(p.base + "/health")
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
    ap.add_argument("--itl-batch-tokens", default="64,256,4096",
                    help="swizzle's --batch-tokens for part 2, one run each (>= the prompt: unchunked)")
    ap.add_argument("--itl-streams", type=int, default=4, help="streams decoding while the long prompt arrives")
    ap.add_argument("--llama-server", default=os.environ.get("SWZ_LLAMA_SERVER"),
                    help="llama.cpp's llama-server binary (the peer with slots); without: llama_cpp.server")
    ap.add_argument("--swizzle-args", default="", help="more swizzle-rt serve arguments (e.g. --no-spec), space-separated")
    ap.add_argument("--marker", choices=("system", "user"), default="system",
                    help="where each request's unique marker goes (see MARKER_IN)")
    ap.add_argument("--ignore-eos", action="store_true",
                    help="requests carry ignore_eos (both servers): random-weight models end their answers early")
    ap.add_argument("--gpu", action="store_true", help="llama-server on the GPU (-ngl 99 -fa on); --package is a GPU package")
    ap.add_argument("--gguf", default=None, help="model 'custom': its GGUF")
    ap.add_argument("--package", default=None, help="model 'custom': its package")
    ap.add_argument("--max-tokens", type=int, default=None, help="override the model's max_tokens of part 1")
    ap.add_argument("--itl-max-tokens", type=int, default=None, help="override the model's stream length of part 2")
    ap.add_argument("--parallel", type=int, default=16)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--swizzle-rt", default=None, help="the swizzle-rt binary (default: BUILD/server/swizzle-rt)")
    ap.add_argument("--smollm2-package", default=None)
    ap.add_argument("--qwen-package", default=None)
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    global IGNORE_EOS, MARKER_IN
    IGNORE_EOS = args.ignore_eos
    MARKER_IN = args.marker
    streams = [int(x) for x in args.streams.split(",") if x]
    rt = args.swizzle_rt or os.path.join(args.build, "server", "swizzle-rt")
    swz_extra = args.swizzle_args.split()
    if "smollm2" in args.models.split(","):
        MODELS["smollm2"]["gguf"] = models.default_gguf()
    MODELS["custom"]["gguf"] = args.gguf
    slots = bool(args.llama_server)
    # Swizzle's KV pool defaults to room for 4 full contexts; llama-server gets the same.
    peer_ctx = 4 * args.ctx
    peer_note = (SLOTS_NOTE.format(np=args.parallel, c=peer_ctx, gpu=", -ngl 99 -fa on" if args.gpu else "") if slots
                 else SERIAL_NOTE)
    peer_name = "llama-server" if slots else "llama.cpp (serial)"
    tmp = tempfile.mkdtemp(prefix="bench-conc-")
    out = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "commit": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True).stdout.strip(),
           "machine": f"{platform.machine()} {os.cpu_count()} cores", "loadavg_start": os.getloadavg(),
           "threads": args.threads, "swizzle_args": args.swizzle_args, "ignore_eos": args.ignore_eos, "ctx": args.ctx, "parallel": args.parallel, "reps": args.reps,
           "peer": peer_name, "peer_note": peer_note, "gpu": args.gpu, "marker_in": MARKER_IN, "models": {}}
    print(f"note: {peer_note}", file=sys.stderr)
    try:
        import importlib.metadata
        out["llama_cpp_python"] = importlib.metadata.version("llama_cpp_python")
    except Exception:  # noqa: BLE001
        out["llama_cpp_python"] = None
    if slots:
        v = subprocess.run([args.llama_server, "--version"], capture_output=True, text=True)
        out["llama_server"] = {"binary": args.llama_server, "version": (v.stdout + v.stderr).strip()[-300:]}
    for name in args.models.split(","):
        cfg = dict(MODELS[name])
        if args.max_tokens:
            cfg["max_tokens"] = args.max_tokens
        if args.itl_max_tokens:
            cfg["itl_max_tokens"] = cfg["itl_peer_max_tokens"] = args.itl_max_tokens
        gguf = cfg["gguf"]
        if not gguf:
            raise SystemExit(f"model {name}: no GGUF (--gguf)")
        pkg = args.package if name == "custom" else getattr(args, f"{name}_package")
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
            servers["swizzle"] = start_swizzle(rt, pkg, args.ctx, args.threads, "--parallel", str(args.parallel), *swz_extra)
            peer_argv = llama_server_argv(args.llama_server, gguf, peer_ctx, args.parallel, args.threads, args.gpu) \
                if slots else None
            if not args.no_peer:
                servers["llama.cpp"] = start_llama_server(peer_argv) if slots else start_llama(gguf, args.ctx, args.threads)
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
                            f"{', default' if bt == '256' else ''})", ["--batch-tokens", bt])
                           for bt in args.itl_batch_tokens.split(",")]
                for label, extra in configs:
                    srv = start_swizzle(rt, pkg, args.ctx, args.threads, "--parallel", str(args.parallel), *swz_extra, *extra)
                    try:
                        round_of(srv.base, 2, 8)
                        res["itl"][label] = itl_run(srv.base, long_text, cfg["itl_max_tokens"], args.itl_streams)
                    finally:
                        srv.stop()
                    print(f"{name} itl {label}: {res['itl'][label]}", file=sys.stderr)
                if "llama.cpp" in servers and slots:
                    # At its defaults (the server already running), then with prompt batches
                    # as small as swizzle's smallest budget.
                    small = min(int(bt) for bt in args.itl_batch_tokens.split(","))
                    for label, extra in [("llama-server (defaults: -b 2048 -ub 512)", None),
                                         (f"llama-server -b {small} -ub {small}", ["-b", str(small), "-ub", str(small)])]:
                        if extra:
                            servers["llama.cpp"].stop()
                            servers["llama.cpp"] = start_llama_server(peer_argv + extra)
                        round_of(servers["llama.cpp"].base, 2, 8)
                        res["itl"][label] = itl_run(servers["llama.cpp"].base, long_text, cfg["itl_max_tokens"],
                                                    args.itl_streams)
                        print(f"{name} itl {label}: {res['itl'][label]}", file=sys.stderr)
                elif "llama.cpp" in servers:
                    res["itl"]["llama.cpp (serial)"] = itl_run(servers["llama.cpp"].base, long_text, cfg["itl_peer_max_tokens"],
                                                               args.itl_streams)
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
        print(f"| streams | swizzle tok/s | swizzle TTFT p50 / p99 s |" +
              (f" {peer_name} tok/s | {peer_name} TTFT p50 / p99 s | tok/s ratio | TTFT p99 ratio (peer/swz) |"
               if peer else ""))
        print("|---|---|---|" + ("---|---|---|---|" if peer else ""))
        num = lambda x, f=".3f": format(x, f) if x is not None else "-"  # noqa: E731
        ratio = lambda a, b: f"{a / b:.2f}x" if a and b else "-"  # noqa: E731
        for n, v in res["throughput"].items():
            sw = v["swizzle"]
            line = f"| {n} | {sw['tok_s_median']:.1f} | {num(sw['ttft_p50_s'])} / {num(sw['ttft_p99_s'])} |"
            if peer:
                lc = v["llama.cpp"]
                line += (f" {lc['tok_s_median']:.1f} | {num(lc['ttft_p50_s'])} / {num(lc['ttft_p99_s'])} |"
                         f" {ratio(sw['tok_s_median'], lc['tok_s_median'])} | {ratio(lc['ttft_p99_s'], sw['ttft_p99_s'])} |")
            print(line)
        if res["itl"]:
            print(f"\nITL of {args.itl_streams} streams while a {res.get('long_prompt_tokens')}-token prompt arrives:\n")
            print("| server | ITL p50 / p99 / max in window ms | gaps | window s | long TTFT s | ITL p50 / p99 whole run ms |")
            print("|---|---|---|---|---|---|")
            for label, r in res["itl"].items():
                f = lambda x: f"{x * 1000:.1f}" if x is not None else "-"  # noqa: E731
                print(f"| {label} | {f(r['itl_window_p50_s'])} / {f(r['itl_window_p99_s'])} / {f(r['itl_window_max_s'])} |"
                      f" {r['gaps_in_window']} | {r['window_s']:.2f} | {num(r['long_ttft_s'], '.2f')} |"
                      f" {f(r['itl_all_p50_s'])} / {f(r['itl_all_p99_s'])} |")
    print(f"\nnote: {peer_note}")
    path = args.json or os.path.join(ROOT, "bench", "results",
                                     f"concurrency-{out['date'][:10]}-{out['commit']}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
