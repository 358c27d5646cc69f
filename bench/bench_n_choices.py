#!/usr/bin/env python3
"""Wall time of one chat request with n choices (issue 14 item 2), two swizzle-rt binaries
side by side on the same package: e.g. the commit before n choices became one batched
request (choices run one after another) and after (one prefill, the choices decode
together sharing the prompt's KV pages).

Each repetition sends, to each server in turn, one non-streamed chat completion with a
~500-token prompt (a fresh nonce at its start, so no repetition hits the prefix cache of
an earlier one), `n` choices, a fixed seed and temperature, and times it from send to the
last byte. The choices must be the same text on both servers (same seeds); the script
checks it. Prints a table and writes JSON (--out).

  bench/bench_n_choices.py --rt before=/path/swizzle-rt --rt after=build/server/swizzle-rt \\
      --package build/models/smollm2.swz --reps 5 --out bench/results/n_choices.json
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request

TOPICS = ["binary search", "hash maps", "TCP and UDP", "linked lists", "KV caches", "compilers", "tic-tac-toe",
          "the sky's colour"]


def prompt_text(nonce: int) -> str:
    rules = " ".join(f"Rule {i}: explain {TOPICS[i % 8]} plainly, with one short example in Python." for i in range(25))
    return f"[session {nonce}] You are a careful reviewer. {rules} Now write one tip about testing."


class Server:
    def __init__(self, rt: str, package: str, extra: list[str]):
        self.p = subprocess.Popen([rt, "serve", package, "--host", "127.0.0.1", "--port", "0", *extra],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 180
        while time.time() < deadline:
            line = self.p.stdout.readline()
            m = re.search(r"listening on (http://\S+)", line)
            if m:
                self.url = m.group(1)
                return
            if not line and self.p.poll() is not None:
                break
        raise RuntimeError(f"{rt} did not start")

    def metric(self, name: str) -> float:
        text = urllib.request.urlopen(self.url + "/metrics", timeout=30).read().decode()
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[-1])
        return float("nan")

    def chat(self, body: dict) -> tuple[float, dict]:
        req = urllib.request.Request(self.url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        t0 = time.perf_counter()
        with urllib.request.urlopen(req, timeout=1800) as r:
            out = json.loads(r.read())
        return time.perf_counter() - t0, out

    def stop(self):
        self.p.terminate()
        try:
            self.p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.p.kill()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rt", action="append", required=True, help="LABEL=PATH of a swizzle-rt binary (repeat)")
    ap.add_argument("--package", required=True)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--serve-arg", action="append", default=[], help="extra argument for both servers (repeat)")
    ap.add_argument("--out", help="JSON results file")
    a = ap.parse_args()

    load_start = os.getloadavg()
    servers = {}
    for spec in a.rt:
        label, path = spec.split("=", 1)
        servers[label] = Server(path, a.package, ["-c", str(a.ctx), *a.serve_arg])
    rows = {label: [] for label in servers}
    try:
        # One warm-up request each (page faults, thread pools), not timed.
        for s in servers.values():
            s.chat({"messages": [{"role": "user", "content": "Hi."}], "max_tokens": 4, "temperature": 0})
        for rep in range(a.reps):
            body = {"messages": [{"role": "user", "content": prompt_text(1000 + rep)}], "n": a.n,
                    "max_tokens": a.max_tokens, "temperature": a.temperature, "seed": a.seed}
            texts = {}
            for label, s in servers.items():
                miss0 = s.metric("swizzle_prefix_cache_miss_tokens_total")
                secs, out = s.chat(body)
                miss = s.metric("swizzle_prefix_cache_miss_tokens_total") - miss0
                texts[label] = [c["message"]["content"] for c in out["choices"]]
                rows[label].append({"rep": rep, "seconds": secs, "prompt_tokens": out["usage"]["prompt_tokens"],
                                    "completion_tokens": out["usage"]["completion_tokens"], "prefilled_tokens": miss})
                print(f"rep {rep} {label:>8}: {secs:7.2f} s, prompt {out['usage']['prompt_tokens']}, "
                      f"completion {out['usage']['completion_tokens']}, prefilled {miss:.0f}", flush=True)
            first = next(iter(texts.values()))
            same = all(t == first for t in texts.values())
            print(f"rep {rep}: choices identical across binaries: {same}", flush=True)
            for label in servers:
                rows[label][-1]["same_choices"] = same
    finally:
        for s in servers.values():
            s.stop()

    load_end = os.getloadavg()
    print(f"\nn={a.n}, max_tokens={a.max_tokens}, temperature={a.temperature}, seed={a.seed}, reps={a.reps}; "
          f"load average {load_start[0]:.1f} at start, {load_end[0]:.1f} at end")
    print(f"{'binary':>8} | median s | min s  | prompt | completion | prefilled tokens (median)")
    med = {}
    for label, rs in rows.items():
        med[label] = statistics.median(r["seconds"] for r in rs)
        print(f"{label:>8} | {med[label]:8.2f} | {min(r['seconds'] for r in rs):6.2f} | {rs[0]['prompt_tokens']:6d} | "
              f"{statistics.median(r['completion_tokens'] for r in rs):10.0f} | "
              f"{statistics.median(r['prefilled_tokens'] for r in rs):.0f}")
    labels = list(rows)
    if len(labels) == 2:
        print(f"speed-up {labels[0]} / {labels[1]}: {med[labels[0]] / med[labels[1]]:.2f}x")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"args": vars(a), "rows": rows, "median_seconds": med, "nproc": os.cpu_count(),
                       "loadavg_start": load_start, "loadavg_end": load_end}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
