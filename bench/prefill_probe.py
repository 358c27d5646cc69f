#!/usr/bin/env python3
"""A long prompt's prefill through a running `swizzle-rt serve`, alone and while N streams
decode (issue 14 item 6's chunked-prefill cost): the prompt's time to its one token, and
from /metrics the scheduler steps taken meanwhile, their mean time and rows. Standard
library only (it runs on the GPU machine as is).

  bench/prefill_probe.py PORT --tokens 8192 [--streams 0,32] [--stream-tokens 2000]

Prints one line per case and a JSON list at the end."""
import argparse
import json
import random
import sys
import threading
import time
import urllib.error
import urllib.request

WORDS = "alpha beta gamma delta epsilon river mountain cloud stone paper window garden table light shadow".split()


def post(base, path, body, timeout=1800):
    req = urllib.request.Request(base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        sys.exit(f"{path}: HTTP {e.code}: {e.read()[:400]!r}")


def metrics(base):
    out = {}
    with urllib.request.urlopen(base + "/metrics", timeout=60) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("#") or " " not in line:
                continue
            name, value = line.rsplit(" ", 1)
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


def stream(base, stop, counts, i, n_tokens):
    """One streamed greedy completion (ignore_eos) until `stop`; counts its token events."""
    body = {"prompt": f"[{i}] Once upon a time", "max_tokens": n_tokens, "temperature": 0, "stream": True,
            "ignore_eos": True}
    req = urllib.request.Request(base + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=1800) as r:
        for line in r:
            if stop.is_set():
                break
            if line.startswith(b"data: {"):
                counts[i] += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port")
    ap.add_argument("--tokens", type=int, default=8192, help="the long prompt's length (tokens, about)")
    ap.add_argument("--streams", default="0,32", help="decoding streams while it prefills, one case each")
    ap.add_argument("--stream-tokens", type=int, default=2000)
    a = ap.parse_args()
    base = f"http://127.0.0.1:{a.port}"
    rng = random.Random(1)
    probe = " ".join(rng.choice(WORDS) for _ in range(1000))
    per_word = len(post(base, "/tokenize", {"content": probe})["tokens"]) / 1000
    rows = []
    for case, n_streams in enumerate(int(s) for s in a.streams.split(",")):
        stop = threading.Event()
        counts = [0] * n_streams
        threads = [threading.Thread(target=stream, args=(base, stop, counts, i, a.stream_tokens), daemon=True)
                   for i in range(n_streams)]
        for t in threads:
            t.start()
        t_wait = time.perf_counter()
        while n_streams and min(counts) < 3 and time.perf_counter() - t_wait < 120:
            time.sleep(0.05)
        text = f"[case {case}] " + " ".join(rng.choice(WORDS) for _ in range(int(a.tokens / per_word)))
        n = len(post(base, "/tokenize", {"content": text})["tokens"])
        m0, c0 = metrics(base), sum(counts)
        t0 = time.perf_counter()
        post(base, "/v1/completions", {"prompt": text, "max_tokens": 1, "temperature": 0})
        dt = time.perf_counter() - t0
        m1, c1 = metrics(base), sum(counts)
        stop.set()
        d = {k: m1.get(k, 0) - m0.get(k, 0) for k in m1}
        steps = d.get("swizzle_step_seconds_count", 0)
        row = {"streams": n_streams, "prompt_tokens": n, "seconds": dt, "prompt_tok_s": n / dt, "steps": steps,
               "step_ms_mean": 1e3 * d.get("swizzle_step_seconds_sum", 0) / steps if steps else None,
               "stream_tokens_meanwhile": c1 - c0,
               "prefill_rows": d.get("swizzle_prefill_rows_total")}
        rows.append(row)
        print(f"{n_streams:3d} streams: {n}-token prompt in {dt:.2f} s ({n / dt:.0f} tok/s), {steps:.0f} steps, "
              f"{row['step_ms_mean'] or 0:.1f} ms a step (forward), {c1 - c0} stream tokens meanwhile", flush=True)
        for t in threads:
            t.join(timeout=60)
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
