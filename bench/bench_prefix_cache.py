#!/usr/bin/env python3
"""Prefix-cache benchmark over realistic coding-agent sessions: `swizzle-rt serve` against
llama.cpp's server (llama-cpp-python's `python -m llama_cpp.server`, with its prompt
cache: the KV cache of the previous request is reused up to the longest common token
prefix) on the same GGUF, in the same run, requests interleaved between the two.

Sessions come from bench/agent_sessions.py (system prompt with tool schemas, pinned
files of the real `itsdangerous` package, growing conversation with tool outputs and
diffs; one session edits a pinned file at turn 3). Every turn is sent to both servers as a
streamed, greedy chat completion (max_tokens small: this measures prompt processing).

Reported per turn and per server: the cached-token ratio (cached / prompt tokens), TTFT
warm (the session as it runs, so earlier turns can be reused) and TTFT cold (the same
prompt made unmatchable by a unique marker at its very start, run in a second pass), and
the cost of the turn priced with --prices (the same prices for both; cached input tokens
at their cached price). TTFT is client-side: from sending the request to the first
non-empty content delta (or the finish chunk when the completion is empty).

Where the numbers come from:
- swizzle: usage.prompt_tokens_details.cached_tokens of the include_usage chunk (the
  X-Swizzle-Cache-Hit-Tokens header is checked to agree), cost from that usage; its
  X-Swizzle-Cost-USD header (the prompt's cost on a stream) is checked against ours.
- llama.cpp: llama-cpp-python reports no cached tokens, so they are read from its server
  log, where it prints per request "Llama.generate: N prefix-match hit, remaining M prompt
  tokens to eval" (cached = N, prompt = N + M) or "full prompt already cached"; a request
  without either line was evaluated from scratch (cached = 0, prompt = the prompt-eval
  token count of its llama_perf line). Output tokens: its streamed content chunks (one per
  token).

Setup (once; the server extras are for this benchmark only, not in requirements.txt):
  .venv/bin/pip install uvicorn fastapi pydantic-settings sse-starlette 'starlette-context>=0.3.6,<0.4' PyYAML
  (the dependencies of `pip install 'llama-cpp-python[server]'`, without rebuilding llama.cpp)

Usage:
  .venv/bin/python bench/bench_prefix_cache.py [--gguf PATH] [--ctx 8192] [--max-tokens 16]
      [--threads N] [--prices bench/prices.json] [--no-cold] [--sessions feature,review]
      [--max-turns N] [--no-peer] [--json OUT] [--scale S]
      [--modes exact,reorder [--agree-tokens 64] [--questions]]
With --modes: no peer; each cache mode (server/cache_mode.h) on a fresh swizzle server over
the sessions plus 'edit-pinned-twice' (agent_sessions.build_edit_twice_session): cached
ratio and TTFT per turn, greedy agreement of the first 64 tokens with exact and mean KL
of the next-token distributions (top 20); with --questions also the fixed questions about
the pinned code (agent_sessions.QUESTIONS) after each session's last turn, each answer
checked against its keywords and compared with exact's; JSON to
bench/results/cache-modes-<date>-<commit>.json. --scale S builds the sessions at tool-output
scale S instead of fitting them to --ctx with llama-cpp-python's tokenizer.
Default GGUF: SmolLM2-135M-Instruct Q4_1 (8192-token context); the Qwen2.5-Coder-0.5B GGUF
(scripts/fetch-qwen.sh) works too (--ctx up to 32768; the sessions fit in 8192 either way).
Prints a markdown table and writes JSON to bench/results/prefix-cache-<date>-<commit>.json.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import math
import os
import platform
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from decimal import Decimal

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "parity"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import agent_sessions  # noqa: E402
import models  # noqa: E402

MTOK = Decimal(1_000_000)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    """A server subprocess with its log in a file."""

    def __init__(self, argv, name):
        self.name = name
        self.log_path = tempfile.mkstemp(prefix=f"bench-{name}-", suffix=".log")[1]
        self.log_file = open(self.log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=self.log_file, stderr=subprocess.STDOUT, text=True)
        self.offset = 0

    def log(self) -> str:
        self.log_file.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def new_log(self) -> str:
        """Log text written since the previous call."""
        text = self.log()
        new, self.offset = text[self.offset:], len(text)
        return new

    def wait_ready(self, url: str, timeout: float = 600):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log()[-4000:]}")
            try:
                if requests.get(url, timeout=5).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"{self.name} not ready after {timeout}s:\n{self.log()[-4000:]}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log_file.close()


def stream_chat(base: str, messages, max_tokens: int, include_usage: bool, extra: dict | None = None):
    """One streamed greedy chat completion; returns timings, text chunks, usage, headers, and
    (with extra={"logprobs": True}) the generated tokens' strings from the logprobs entries."""
    body = {"model": "bench", "messages": messages, "temperature": 0, "max_tokens": max_tokens, "stream": True}
    body.update(extra or {})
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    t0 = time.perf_counter()
    r = requests.post(base + "/v1/chat/completions", json=body, stream=True, timeout=1800)
    if r.status_code != 200:
        raise RuntimeError(f"{base}: HTTP {r.status_code}: {r.text[:500]}")
    ttft, usage, chunks, finish_t, tokens, tops = None, None, 0, None, [], []
    # Lines split as bytes: str.splitlines (requests' decode_unicode=True) also splits at
    # U+0085 / U+2028 / U+2029, which JSON strings may hold unescaped (a token's text).
    for raw in r.iter_lines():
        line = raw.decode("utf-8")
        if not line or not line.startswith("data: "):
            continue
        data = line[6:]
        if data == "[DONE]":
            break
        ev = json.loads(data)
        if "error" in ev:
            raise RuntimeError(f"{base}: stream error {ev['error']}")
        if ev.get("usage"):
            usage = ev["usage"]
        for ch in ev.get("choices") or []:
            for e in (ch.get("logprobs") or {}).get("content") or []:
                tokens.append(e["token"])
                tops.append({t["token"]: t["logprob"] for t in e.get("top_logprobs") or []})
            if (ch.get("delta") or {}).get("content"):
                chunks += 1
                if ttft is None:
                    ttft = time.perf_counter() - t0
            if ch.get("finish_reason") and finish_t is None:
                finish_t = time.perf_counter() - t0
    total = time.perf_counter() - t0
    return {"ttft_s": ttft if ttft is not None else (finish_t or total), "total_s": total, "content_chunks": chunks,
            "usage": usage, "headers": dict(r.headers), "tokens": tokens, "top_logprobs": tops}


def cost(prices: dict, prompt: int, cached: int, output: int) -> Decimal:
    p = prices.get("default", {"input": 0, "output": 0})
    inp, out = Decimal(str(p["input"])), Decimal(str(p["output"]))
    cin = Decimal(str(p["cached_input"])) if "cached_input" in p else inp / 10
    return ((prompt - cached) * inp + cached * cin + output * out) / MTOK


HIT_RE = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")
FULL_RE = re.compile(r"Llama\.generate: full prompt already cached")
PERF_PROMPT_RE = re.compile(r"prompt eval time\s*=\s*[\d.]+ ms /\s*(\d+) tokens")


def llama_counts(log: str, fallback_prompt: int):
    """(prompt_tokens, cached_tokens, source) of one request from llama-cpp-python's log."""
    if m := HIT_RE.search(log):
        return int(m.group(1)) + int(m.group(2)), int(m.group(1)), "prefix-match"
    if FULL_RE.search(log):
        return fallback_prompt, fallback_prompt, "full-cache"
    if m := PERF_PROMPT_RE.search(log):
        return int(m.group(1)), 0, "perf"
    return fallback_prompt, 0, "none"


def fit_sessions(gguf: str, budget: int):
    """Sessions whose longest prompt fits `budget` tokens (counted with the GGUF's tokenizer)."""
    from llama_cpp import Llama
    vocab = Llama(model_path=gguf, vocab_only=True, verbose=False)

    def n_tokens(messages):
        return sum(len(vocab.tokenize(m["content"].encode(), add_bos=False, special=False)) + 8 for m in messages) + 4

    for scale in (1.0, 0.8, 0.65, 0.5, 0.4, 0.3, 0.2):
        sessions = agent_sessions.build_sessions(scale)
        longest = max(n_tokens(t) for s in sessions for t in s.turns)
        if longest <= budget:
            return sessions, scale, longest
    raise RuntimeError(f"the sessions do not fit {budget} tokens even at scale 0.2 (longest {longest})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gguf", default=None, help="default: the embedded SmolLM2-135M-Instruct Q4_1")
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--prices", default=os.path.join(ROOT, "bench", "prices.json"))
    ap.add_argument("--no-cold", action="store_true", help="skip the cold pass")
    ap.add_argument("--sessions", default=None, help="comma-separated session names (default: all)")
    ap.add_argument("--max-turns", type=int, default=0, help="only the first N turns of each session (smoke runs)")
    ap.add_argument("--no-peer", action="store_true", help="swizzle only (llama_cpp.server not installed)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--package", default=None, help="a compiled .swz of --gguf (default: compiled now)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--modes", default=None,
                    help="comma-separated cache modes (e.g. exact,reorder,approx; approx:F recomputes the share F of "
                         "each reused atom, approx:head / approx:deviation chooses which tokens, approx:F:head both): instead of the peer comparison, run every "
                         "session once per mode, each mode on a fresh swizzle server, and compare with exact")
    ap.add_argument("--agree-tokens", type=int, default=64, help="--modes: greedy tokens compared with exact per turn")
    ap.add_argument("--scale", type=float, default=None,
                    help="tool-output scale of the sessions (agent_sessions.build_sessions) instead of the largest "
                         "that fits --ctx by llama-cpp-python's tokenizer (which is then not needed; an over-long "
                         "prompt is refused by the server)")
    ap.add_argument("--questions", action="store_true",
                    help="--modes: after each session's last turn, ask agent_sessions.QUESTIONS about the pinned "
                         "code in every mode (answers checked against their keywords and compared with exact's)")
    args = ap.parse_args()
    if args.questions and not args.modes:
        ap.error("--questions needs --modes (the questions compare cache modes)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the servers (finally) when killed
    gguf = os.path.abspath(args.gguf or models.default_gguf())
    prices = json.load(open(args.prices))

    if args.scale:
        sessions, scale, longest = agent_sessions.build_sessions(args.scale), args.scale, "?"
    else:
        sessions, scale, longest = fit_sessions(gguf, args.ctx - args.max_tokens - 64)
    if args.sessions:
        keep = args.sessions.split(",")
        sessions = [s for s in sessions if s.name in keep]
    if args.max_turns:
        for s in sessions:
            s.turns = s.turns[:args.max_turns]
    print(f"sessions: {[(s.name, len(s.turns)) for s in sessions]}, tool-output scale {scale}, "
          f"longest prompt ~{longest} tokens (budget {args.ctx - args.max_tokens - 64})", file=sys.stderr)

    tmp = tempfile.mkdtemp(prefix="bench-prefix-")
    pkg = args.package
    if not pkg:
        pkg = os.path.join(tmp, "model.swz")
        subprocess.run([os.path.join(args.build, "compiler", "swizzlec"), "compile", gguf, "--target", "cpu", "-o", pkg],
                       check=True, stdout=subprocess.DEVNULL)
    if args.modes:
        run_modes(args, sessions, pkg, scale, gguf)
        return
    servers = {}
    try:
        port = free_port()
        swz = Proc([os.path.join(args.build, "server", "swizzle-rt"), "serve", pkg, "--host", "127.0.0.1", "--port",
                    str(port), "-c", str(args.ctx), "-t", str(args.threads), "--prices", args.prices], "swizzle")
        swz.base = f"http://127.0.0.1:{port}"
        swz.wait_ready(swz.base + "/health")
        servers["swizzle"] = swz
        if not args.no_peer:
            port = free_port()
            peer = Proc([sys.executable, "-m", "llama_cpp.server", "--model", gguf, "--n_ctx", str(args.ctx),
                         "--n_threads", str(args.threads), "--n_threads_batch", str(args.threads), "--n_batch", "512",
                         "--host", "127.0.0.1", "--port", str(port)], "llama.cpp")
            peer.base = f"http://127.0.0.1:{port}"
            peer.wait_ready(peer.base + "/v1/models")
            servers["llama.cpp"] = peer

        def run_one(name, messages):
            srv = servers[name]
            srv.new_log()
            r = stream_chat(srv.base, messages, args.max_tokens, include_usage=(name == "swizzle"))
            if name == "swizzle":
                u = r["usage"]
                prompt, cached, output = u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"], u["completion_tokens"]
                assert int(r["headers"]["X-Swizzle-Cache-Hit-Tokens"]) == cached, r["headers"]
                header_cost = Decimal(r["headers"]["X-Swizzle-Cost-USD"])
                assert header_cost == cost(prices, prompt, cached, 0), (header_cost, u)
                source = "usage"
            else:
                time.sleep(0.2)  # let the server flush its log lines for this request
                prompt, cached, source = llama_counts(srv.new_log(), fallback_prompt=-1)
                output = r["content_chunks"]
            return {"prompt_tokens": prompt, "cached_tokens": cached, "output_tokens": output,
                    "cached_ratio": cached / prompt if prompt > 0 else None, "ttft_s": r["ttft_s"], "total_s": r["total_s"],
                    "cost_usd": str(cost(prices, prompt, cached, output)) if prompt >= 0 else None, "source": source}

        rows = []
        for s in sessions:  # warm pass: each session as an agent runs it, both servers turn by turn
            for i, msgs in enumerate(s.turns, 1):
                row = {"session": s.name, "turn": i}
                for name in servers:
                    row[name] = {"warm": run_one(name, msgs)}
                rows.append(row)
                print(f"warm {s.name} turn {i}: " + ", ".join(
                    f"{n} {row[n]['warm']['cached_tokens']}/{row[n]['warm']['prompt_tokens']} ttft {row[n]['warm']['ttft_s']:.2f}s"
                    for n in servers), file=sys.stderr)
        if not args.no_cold:  # cold pass: a unique marker first, so nothing can match
            k = 0
            for s in sessions:
                for i, msgs in enumerate(s.turns, 1):
                    marker = f"{uuid.uuid4().hex[:12]} (cold run)\n"  # random from its first character
                    cold = [dict(msgs[0], content=marker + msgs[0]["content"])] + msgs[1:]
                    row = rows[k]
                    k += 1
                    for name in servers:
                        row[name]["cold"] = run_one(name, cold)
                    print(f"cold {s.name} turn {i}: " + ", ".join(
                        f"{n} {row[n]['cold']['cached_tokens']}/{row[n]['cold']['prompt_tokens']} ttft {row[n]['cold']['ttft_s']:.2f}s"
                        for n in servers), file=sys.stderr)
        ledger = requests.get(servers["swizzle"].base + "/v1/usage", timeout=30).json()
        metrics = requests.get(servers["swizzle"].base + "/metrics", timeout=30).text
    finally:
        for srv in servers.values():
            srv.stop()

    summary = {}
    for name in servers:
        warm = [r[name]["warm"] for r in rows]
        cold = [r[name]["cold"] for r in rows if "cold" in r[name]]
        p, c = sum(w["prompt_tokens"] for w in warm), sum(w["cached_tokens"] for w in warm)
        summary[name] = {
            "cached_ratio": c / p if p else None,
            "ttft_warm_median_s": statistics.median(w["ttft_s"] for w in warm),
            "ttft_cold_median_s": statistics.median(x["ttft_s"] for x in cold) if cold else None,
            "cost_warm_usd": str(sum(Decimal(w["cost_usd"]) for w in warm if w["cost_usd"] is not None)),
            "cost_cold_usd": str(sum(Decimal(x["cost_usd"]) for x in cold if x["cost_usd"] is not None)) if cold else None,
        }
    if "llama.cpp" in summary:
        summary["ratio_ttft_warm"] = summary["swizzle"]["ttft_warm_median_s"] / summary["llama.cpp"]["ttft_warm_median_s"]
        if summary["swizzle"]["ttft_cold_median_s"] and summary["llama.cpp"]["ttft_cold_median_s"]:
            summary["ratio_ttft_cold"] = summary["swizzle"]["ttft_cold_median_s"] / summary["llama.cpp"]["ttft_cold_median_s"]

    names = list(servers)
    head = "| session | turn | prompt |" + "".join(f" {n} cached | {n} TTFT warm s | {n} TTFT cold s | {n} cost USD |" for n in names)
    print(head)
    print("|" + "---|" * (3 + 4 * len(names)))
    for r in rows:
        line = f"| {r['session']} | {r['turn']} | {r['swizzle']['warm']['prompt_tokens']} |"
        for n in names:
            w, cd = r[n]["warm"], r[n].get("cold")
            ratio = f"{w['cached_ratio']:.0%}" if w["cached_ratio"] is not None else "?"
            line += f" {ratio} | {w['ttft_s']:.3f} | {cd['ttft_s']:.3f} |" if cd else f" {ratio} | {w['ttft_s']:.3f} | - |"
            line += f" {Decimal(w['cost_usd']):.8f} |" if w["cost_usd"] else " ? |"
        print(line)
    for n in names:
        sm = summary[n]
        cold_s = f"{sm['ttft_cold_median_s']:.3f}" if sm["ttft_cold_median_s"] is not None else "-"
        print(f"{n}: cached {sm['cached_ratio']:.1%} of prompt tokens; TTFT median warm {sm['ttft_warm_median_s']:.3f} s, "
              f"cold {cold_s} s; cost of the warm pass {sm['cost_warm_usd']} USD")
    if "ratio_ttft_warm" in summary:
        print(f"TTFT swizzle / llama.cpp: warm {summary['ratio_ttft_warm']:.2f}x"
              + (f", cold {summary['ratio_ttft_cold']:.2f}x" if "ratio_ttft_cold" in summary else ""))

    import llama_cpp
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    res = {"date": datetime.date.today().isoformat(), "commit": commit,
           "machine": f"{platform.machine()} {os.cpu_count()} cores",
           "gguf": os.path.basename(gguf), "ctx": args.ctx, "max_tokens": args.max_tokens, "threads": args.threads,
           "project": f"{agent_sessions.PROJECT} {importlib.metadata.version(agent_sessions.PROJECT)}",
           "tool_output_scale": scale, "prices": prices,
           "peer": None if args.no_peer else f"llama-cpp-python {llama_cpp.__version__} llama_cpp.server (prompt cache: "
                                              "longest common prefix with the previous request)",
           "sessions": [{"name": s.name, "description": s.description, "turns": len(s.turns)} for s in sessions],
           "rows": rows, "summary": summary, "swizzle_ledger": ledger,
           "swizzle_metrics": [l for l in metrics.splitlines() if l.startswith("swizzle_prefix_cache")]}
    path = args.json or os.path.join(ROOT, "bench", "results", f"prefix-cache-{res['date']}-{commit}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {path}")


QUESTION_TOKENS = 32  # greedy tokens generated per question (--questions)


def mode_fields(mode: str) -> dict:
    """The request fields of a --modes entry: a cache mode, then for approx optional
    ":"-separated parts: a number F (swizzle_approx_recompute, the share of each reused atom
    recomputed) and/or "head" or "deviation" (swizzle_approx_select, which tokens), e.g.
    "approx:0.5", "approx:head", "approx:0.15:deviation"."""
    name, *parts = mode.split(":")
    fields = {"swizzle_cache_mode": name}
    for part in parts:
        if part in ("head", "deviation"):
            fields["swizzle_approx_select"] = part
        else:
            fields["swizzle_approx_recompute"] = float(part)
    return fields


def run_modes(args, sessions, pkg, scale, gguf):
    """The cache-mode comparison (issue 15 item 3): per mode a fresh `swizzle-rt serve`, every
    session's turns in order as streamed greedy chat completions with "swizzle_cache_mode",
    max_tokens = --agree-tokens and logprobs (for the generated tokens). Per turn: cached-token
    ratio (usage; the X-Swizzle-Cache-Hit-Tokens header and the reported mode are checked),
    TTFT, and for modes other than exact the greedy agreement with exact's answer to the same
    turn: the fraction of the first N token positions where both generated the same token,
    and the length of the common token prefix, and the mean KL divergence of the next-token
    distributions (top_logprobs 20) over the positions generated from the same text."""
    modes = args.modes.split(",")
    if "exact" not in modes:
        modes.insert(0, "exact")
    sessions = list(sessions) + [agent_sessions.build_edit_twice_session(scale)]
    if args.sessions:
        sessions = [s for s in sessions if s.name in args.sessions.split(",")]
    if args.max_turns:
        for s in sessions:
            s.turns = s.turns[:args.max_turns]
    runs, answers = {}, {}
    for mode in modes:
        port = free_port()
        srv = Proc([os.path.join(args.build, "server", "swizzle-rt"), "serve", pkg, "--host", "127.0.0.1", "--port",
                    str(port), "-c", str(args.ctx), "-t", str(args.threads), "-q"], f"swizzle-{mode}")
        base = f"http://127.0.0.1:{port}"
        try:
            srv.wait_ready(base + "/health")
            for s in sessions:
                for i, msgs in enumerate(s.turns, 1):
                    r = stream_chat(base, msgs, args.agree_tokens, include_usage=True,
                                    extra={**mode_fields(mode), "logprobs": True, "top_logprobs": 20})
                    u = r["usage"]
                    name = mode_fields(mode)["swizzle_cache_mode"]
                    assert r["headers"]["X-Swizzle-Cache-Mode"] == name and u["swizzle_cache_mode"] == name, (mode, u)
                    cached = u["prompt_tokens_details"]["cached_tokens"]
                    assert int(r["headers"]["X-Swizzle-Cache-Hit-Tokens"]) == cached
                    runs[(mode, s.name, i)] = {"prompt_tokens": u["prompt_tokens"], "cached_tokens": cached,
                                               "cached_ratio": cached / u["prompt_tokens"], "ttft_s": r["ttft_s"],
                                               "tokens": r["tokens"], "top_logprobs": r["top_logprobs"]}
                    print(f"{mode} {s.name} turn {i}: {cached}/{u['prompt_tokens']} ttft {r['ttft_s']:.3f}s",
                          file=sys.stderr)
                # The questions, each after the session's last turn (a second user message).
                for qi, (question, _) in enumerate(agent_sessions.QUESTIONS if args.questions else []):
                    msgs = list(s.turns[-1]) + [{"role": "user", "content": question}]
                    r = stream_chat(base, msgs, QUESTION_TOKENS, include_usage=True,
                                    extra={**mode_fields(mode), "logprobs": True})
                    assert r["usage"]["swizzle_cache_mode"] == mode_fields(mode)["swizzle_cache_mode"], (mode, r["usage"])
                    answers[(mode, s.name, qi)] = r["tokens"]
                    print(f"{mode} {s.name} question {qi + 1}: {''.join(r['tokens'])!r}", file=sys.stderr)
        finally:
            srv.stop()

    def agreement(a, b, n):
        a, b = a[:n], b[:n]
        same = sum(x == y for x, y in zip(a, b))
        prefix = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        return same / max(len(a), len(b), 1), prefix

    def mean_kl(ref, other, n_same):
        """Mean KL(exact || mode) of the next-token distributions over the positions both
        generated from the same text (up to and including the first disagreement), each over
        exact's top-20 tokens: a token missing from the mode's top 20 gets the mode's 20th
        logprob (so the figure is a lower bound where that happens)."""
        kls = []
        for p, q in list(zip(ref, other))[:n_same + 1]:
            if not p or not q:
                continue
            floor = min(q.values())
            kls.append(sum(math.exp(lp) * (lp - q.get(t, floor)) for t, lp in p.items()))
        return statistics.mean(kls) if kls else None

    rows = []
    for s in sessions:
        for i in range(1, len(s.turns) + 1):
            row = {"session": s.name, "turn": i}
            for mode in modes:
                x = dict(runs[(mode, s.name, i)])
                if mode != "exact":
                    ref = runs[("exact", s.name, i)]
                    x["agree"], x["agree_prefix"] = agreement(x["tokens"], ref["tokens"], args.agree_tokens)
                    x["kl"] = mean_kl(ref["top_logprobs"], x["top_logprobs"], x["agree_prefix"])
                row[mode] = x
            rows.append(row)
    summary = {}
    for mode in modes:
        xs = [r[mode] for r in rows]
        p, c = sum(x["prompt_tokens"] for x in xs), sum(x["cached_tokens"] for x in xs)
        summary[mode] = {"cached_ratio": c / p, "ttft_median_s": statistics.median(x["ttft_s"] for x in xs),
                         "ttft_sum_s": sum(x["ttft_s"] for x in xs)}
        if mode != "exact":
            summary[mode]["agree_mean"] = statistics.mean(x["agree"] for x in xs)
            summary[mode]["identical_turns"] = sum(x["agree"] == 1.0 for x in xs)
            kls = [x["kl"] for x in xs if x["kl"] is not None]
            summary[mode]["kl_mean"] = statistics.mean(kls) if kls else None
    head = "| session | turn |" + "".join(f" {m} prompt | {m} cached | {m} TTFT s |" + (" agree | prefix | KL |" if m != "exact" else "")
                                       for m in modes)
    print(head)
    print("|---|---|" + "".join("---|---|---|" + ("---|---|---|" if m != "exact" else "") for m in modes))
    for r in rows:
        line = f"| {r['session']} | {r['turn']} |"
        for m in modes:
            x = r[m]
            line += f" {x['prompt_tokens']} | {x['cached_ratio']:.0%} | {x['ttft_s']:.3f} |"
            if m != "exact":
                line += f" {x['agree']:.0%} | {x['agree_prefix']} | {x['kl']:.4f} |" if x["kl"] is not None else f" {x['agree']:.0%} | {x['agree_prefix']} | - |"
        print(line)
    for m in modes:
        sm = summary[m]
        extra = (f"; greedy agreement with exact {sm['agree_mean']:.1%} of the first {args.agree_tokens} tokens, "
                 f"{sm['identical_turns']}/{len(rows)} turns identical, mean KL(exact || {m}) "
                 f"{sm['kl_mean']:.4f} nats (top-20)") if m != "exact" else ""
        print(f"{m}: cached {sm['cached_ratio']:.1%} of prompt tokens; TTFT median {sm['ttft_median_s']:.3f} s, "
              f"sum {sm['ttft_sum_s']:.2f} s{extra}")
    questions = []
    if args.questions:
        print(f"\nQuestions about the pinned code after each session's last turn ({QUESTION_TOKENS} greedy tokens; "
              "correct: one of the answer's keywords appears as a word; same: the tokens equal exact's)")
        print("| session | question | " + " | ".join(f"{m} answer | {m} correct" + (f" | {m} same as exact" if m != "exact" else "")
                                               for m in modes) + " |")
        print("|---|---|" + "---|---|" * len(modes) + "---|" * (len(modes) - 1))
        for s in sessions:
            for qi, (question, keys) in enumerate(agent_sessions.QUESTIONS):
                q = {"session": s.name, "question": question, "keywords": keys}
                cells = []
                for m in modes:
                    text = "".join(answers[(m, s.name, qi)])
                    q[m] = {"answer": text, "correct": any(re.search(rf"(?<!\w){re.escape(k)}(?!\w)", text) for k in keys)}
                    if m != "exact":
                        q[m]["same"] = answers[(m, s.name, qi)] == answers[("exact", s.name, qi)]
                    cells.append(f"{json.dumps(text.strip()[:40])} | {'yes' if q[m]['correct'] else 'no'}"
                                 + (f" | {'yes' if q[m]['same'] else 'no'}" if m != "exact" else ""))
                questions.append(q)
                print(f"| {s.name} | {qi + 1} | " + " | ".join(cells) + " |")
        for m in modes:
            correct = sum(q[m]["correct"] for q in questions)
            same = f", {sum(q[m]['same'] for q in questions)}/{len(questions)} answers identical to exact's" if m != "exact" else ""
            summary[m]["questions_correct"] = correct
            print(f"{m}: {correct}/{len(questions)} questions answered correctly{same}")
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    res = {"date": datetime.date.today().isoformat(), "commit": commit,
           "machine": f"{platform.machine()} {os.cpu_count()} cores", "gguf": os.path.basename(gguf), "ctx": args.ctx,
           "agree_tokens": args.agree_tokens, "threads": args.threads, "modes": modes, "tool_output_scale": scale,
           "project": f"{agent_sessions.PROJECT} {importlib.metadata.version(agent_sessions.PROJECT)}",
           "sessions": [{"name": s.name, "description": s.description, "turns": len(s.turns)} for s in sessions],
           "rows": rows, "summary": summary, "questions": questions}
    for r in rows:  # the per-token top-20 lists served the KL above; the JSON keeps the figures
        for m in modes:
            r[m].pop("top_logprobs", None)
    path = args.json or os.path.join(ROOT, "bench", "results", f"cache-modes-{res['date']}-{commit}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
