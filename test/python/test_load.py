"""Load and fault test of `swizzle-rt serve` (issue 14 item 7), on the real default model.

32 client threads hammer one server (--parallel 8 --max-queue 16, so 32 clients overload
it on purpose) with a random mix over both wire formats — OpenAI /v1/chat/completions and
/v1/completions, Anthropic /v1/messages — streamed and not, greedy and sampled, and with
faults: clients that hang up mid-stream, non-streamed requests abandoned by a short read
timeout, requests sent on a raw socket that is closed at once, and bodies cut off half-way.

The issue asks for 60 s of load; to keep `scripts/test-all.sh` within its budget on the
2-core CI machine the measured phase lasts SWZ_LOAD_SECONDS (default 25 s), after a
warm-up phase of the same mix (SWZ_LOAD_WARMUP_SECONDS, default 8 s).
SWZ_LOAD_SECONDS=60 runs the issue's full length.

What is asserted:
- no server error: every response is 200, or 429 (deliberate overload: more clients than
  --parallel + --max-queue) carrying Retry-After and the endpoint's own error schema; no
  5xx, no other status, no connection refused or reset on a request the client did not
  abandon. The 429s the clients saw are counted by swizzle_requests_rejected_total (its
  increase is at least that and at most that plus the requests whose status was never
  read: raw-socket ones and those abandoned before the headers came), and overload did
  happen (at least one 429);
- every completed response is well-formed and right: parsed per wire format (object
  types, SSE event order, one [DONE] / message_stop), finish_reason / stop_reason in
  {stop, length} / {end_turn, max_tokens} as max_tokens allows, usage consistent (total =
  prompt + completion; cached <= prompt; the prompt count equals the prompt's own count;
  completion tokens <= max_tokens, == max_tokens exactly when the reason is length, one
  content delta per token on streams: for ASCII text exactly, else at most, since a
  character split over several tokens is sent once complete). Greedy answers are checked against a reference
  taken from the same server before the load: text and token count must equal the
  reference's first k tokens (outputs do not depend on the batch, issue 14 item 5);
- the server's RSS (VmRSS of /proc/PID/status) after the measured phase is within
  RSS_BOUND_MIB of its value after the warm-up (the host-RAM prefix-cache tier is off,
  --cache-host-mb 0, so that cache does not grow RSS by design);
- afterwards no sequence runs or waits, and every KV page is free or holds exactly one
  cached prefix block (swizzle_kv_pages free + swizzle_prefix_cache_blocks{tier=device} ==
  total): no page stays in a block table of a finished, cancelled or abandoned request.
"""
from __future__ import annotations

import concurrent.futures as cf
import json
import os
import random
import socket
import threading
import time

import pytest
import requests

from conftest import metric, scrape_metrics, start_rt, wait_for

N_CLIENTS = 32
PARALLEL = 8
MAX_QUEUE = 16
LOAD_S = float(os.environ.get("SWZ_LOAD_SECONDS", "25"))
WARMUP_S = float(os.environ.get("SWZ_LOAD_WARMUP_SECONDS", "8"))
RSS_BOUND_MIB = 24  # allocator slack; a leak per request (thousands of them) shows above it
REF_MAX = 32        # reference length; requests ask for 1..REF_MAX tokens
ANTHROPIC = {"anthropic-version": "2023-06-01"}

PROMPTS = ["Write a poem about the sea.", "Explain what a hash map is.", "List three prime numbers.",
           "Tell me a joke about cats."]
# /v1/completions continues raw text: prompts that the model goes on with.
TEXT_PROMPTS = ["The sea is", "A hash map is a data structure that", "The first prime numbers are",
                "Cats are animals that"]
ENDPOINTS = ("chat", "completions", "messages")
PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions", "messages": "/v1/messages"}


def body_for(ep: str, prompt: str, max_tokens: int, stream: bool, temperature: float, seed: int | None):
    if ep == "completions":
        b = {"model": "m", "prompt": TEXT_PROMPTS[PROMPTS.index(prompt)], "max_tokens": max_tokens}
    else:
        b = {"model": "m", "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens}
    b["temperature"] = temperature
    if seed is not None and ep != "messages":
        b["seed"] = seed
    if stream:
        b["stream"] = True
        if ep != "messages":
            b["stream_options"] = {"include_usage": True}
    return b


class Bad(Exception):
    """A response that is not what the wire format and the request demand."""


def check(cond: bool, what: str, *ctx):
    if not cond:
        raise Bad(what + (": " + " | ".join(repr(c)[:400] for c in ctx) if ctx else ""))


def parse_sse_openai(lines, ep: str, max_events: int | None = None):
    """(pieces, finish_reason, usage) of an OpenAI stream; stops early after max_events
    content events (returns None then)."""
    pieces, finish, usage, done, obj = [], None, None, False, None
    kind = "chat.completion.chunk" if ep == "chat" else "text_completion"
    for line in lines:
        if not line:
            continue
        check(line.startswith(b"data: "), "SSE line without data:", line)
        data = line[6:]
        if data == b"[DONE]":
            done = True
            break
        ev = json.loads(data)
        check(ev["object"] == kind, "chunk object", ev)
        obj = obj or ev["id"]
        check(ev["id"] == obj, "chunk ids differ", ev)
        check(not done, "event after [DONE]")
        if ev.get("usage"):
            check(ev["choices"] == [], "usage chunk with choices", ev)
            usage = ev["usage"]
            continue
        check(usage is None, "chunk after the usage chunk", ev)
        (c,) = ev["choices"]
        check(c["index"] == 0, "choice index", ev)
        text = c["delta"].get("content") if ep == "chat" else c["text"]
        if c.get("finish_reason"):
            check(finish is None, "two finish chunks", ev)
            finish = c["finish_reason"]
            check(not text, "text on the finish chunk", ev)
        elif text:
            check(finish is None, "content after finish", ev)
            pieces.append(text)
            if max_events is not None and len(pieces) >= max_events:
                return None
        elif ep == "chat":
            check(c["delta"].get("role") == "assistant" and not pieces, "empty delta that is not the role chunk", ev)
    check(done, "stream without [DONE]")
    check(finish is not None and usage is not None, "stream without finish or usage", finish, usage)
    return pieces, finish, usage


def parse_sse_anthropic(lines, max_events: int | None = None):
    events, pieces = [], []
    event_name = None
    for line in lines:
        if not line:
            continue
        if line.startswith(b"event: "):
            event_name = line[7:].decode()
            continue
        check(line.startswith(b"data: "), "SSE line", line)
        ev = json.loads(line[6:])
        check(ev["type"] == event_name, "event name != data type", event_name, ev)
        events.append(ev)
        if ev["type"] == "content_block_delta":
            check(ev["delta"]["type"] == "text_delta" and ev["index"] == 0, "delta", ev)
            check(ev["delta"]["text"] != "", "empty text delta", ev)
            pieces.append(ev["delta"]["text"])
            if max_events is not None and len(pieces) >= max_events:
                return None
        if ev["type"] == "message_stop":
            break
    types = [e["type"] for e in events]
    check(types[0] == "message_start" and types[-1] == "message_stop", "event order", types)
    check(types[-2] == "message_delta", "message_delta before message_stop", types)
    mid = types[1:-2]
    if pieces:
        check(mid[0] == "content_block_start" and mid[-1] == "content_block_stop" and
              all(t == "content_block_delta" for t in mid[1:-1]), "content block events", types)
    else:  # an empty answer may or may not open a block
        check(all(t in ("content_block_start", "content_block_stop") for t in mid), "empty answer events", types)
    start_usage = events[0]["message"]["usage"]
    md = events[-2]
    usage = dict(md["usage"])
    for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        check(usage.get(k, start_usage[k]) == start_usage[k], "input usage changed between start and delta", start_usage, usage)
        usage[k] = start_usage[k]
    return pieces, md["delta"]["stop_reason"], usage


def normalise(ep: str, pieces: list[str] | None, text: str, finish: str, usage: dict) -> dict:
    """One shape for every endpoint: text, finish in OpenAI terms, prompt/completion/cached."""
    if ep == "messages":
        check(finish in ("end_turn", "max_tokens"), "stop_reason", finish)
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"):
            check(isinstance(usage[k], int) and usage[k] >= 0, "usage field", usage)
        prompt = usage["input_tokens"] + usage["cache_creation_input_tokens"] + usage["cache_read_input_tokens"]
        return {"text": text, "pieces": pieces, "finish": "stop" if finish == "end_turn" else "length",
                "prompt": prompt, "completion": usage["output_tokens"], "cached": usage["cache_read_input_tokens"]}
    check(finish in ("stop", "length"), "finish_reason", finish)
    check(usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"], "total_tokens", usage)
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    check(0 <= cached <= usage["prompt_tokens"], "cached_tokens", usage)
    return {"text": text, "pieces": pieces, "finish": finish, "prompt": usage["prompt_tokens"],
            "completion": usage["completion_tokens"], "cached": cached}


def read_response(ep: str, r: requests.Response, stream: bool, max_events: int | None = None):
    """The normalised answer of a 200 response, or None when max_events cut the stream."""
    check(r.status_code == 200, "status", r.status_code)
    if stream:
        check(r.headers["Content-Type"].startswith("text/event-stream"), "stream content type", r.headers)
        lines = r.iter_lines()
        got = parse_sse_anthropic(lines, max_events) if ep == "messages" else parse_sse_openai(lines, ep, max_events)
        if got is None:
            return None
        pieces, finish, usage = got
        return normalise(ep, pieces, "".join(pieces), finish, usage)
    j = r.json()
    if ep == "messages":
        check(j["type"] == "message" and j["role"] == "assistant", "message", j)
        blocks = j["content"]
        check(all(b["type"] == "text" for b in blocks) and len(blocks) <= 1, "content blocks", j)
        return normalise(ep, None, "".join(b["text"] for b in blocks), j["stop_reason"], j["usage"])
    check(j["object"] == ("chat.completion" if ep == "chat" else "text_completion"), "object", j)
    (c,) = j["choices"]
    text = c["message"]["content"] if ep == "chat" else c["text"]
    if ep == "chat":
        check(c["message"]["role"] == "assistant", "role", j)
    check(isinstance(text, str), "text", j)
    return normalise(ep, None, text, c["finish_reason"], j["usage"])


def check_answer(a: dict, max_tokens: int, ref: dict | None, ctx):
    check(0 <= a["completion"] <= max_tokens, "completion tokens beyond max_tokens", a, max_tokens, ctx)
    if a["finish"] == "length":
        check(a["completion"] == max_tokens, "length before max_tokens", a, max_tokens, ctx)
    if a["pieces"] is not None:
        # One content delta per token, except that a character split over several tokens
        # (an emoji of byte tokens) comes as one delta once complete (never invalid
        # UTF-8, never an empty delta): exactly one per token for ASCII text, at most one
        # per token otherwise (a sampled answer may hold such characters).
        if a["text"].isascii():
            check(len(a["pieces"]) == a["completion"], "content deltas != completion tokens", a, ctx)
        else:
            check(0 < len(a["pieces"]) <= a["completion"], "content deltas > completion tokens", a, ctx)
    if ref is None:
        check(a["completion"] > 0 or a["text"] == "", "text without tokens", a, ctx)
        return
    check(a["prompt"] == ref["prompt"], "prompt tokens differ from the reference", a, ref["prompt"], ctx)
    n_ref = len(ref["pieces"])
    if max_tokens < n_ref or (max_tokens == n_ref and ref["finish"] == "length"):
        want_n, want_finish = max_tokens, {"length"}
    elif max_tokens > n_ref:
        want_n, want_finish = n_ref, {ref["finish"]}
    else:  # max_tokens == n_ref and the reference stopped on its own right there
        want_n, want_finish = n_ref, {"stop", "length"}
    check(a["completion"] == want_n and a["finish"] in want_finish, "tokens / finish differ from the reference",
          a, want_n, want_finish, ctx)
    check(a["text"] == "".join(ref["pieces"][:want_n]), "greedy text differs from the reference", a["text"],
          "".join(ref["pieces"][:want_n]), ctx)


class Load:
    """Shared counters of one load phase."""

    def __init__(self):
        self.lock = threading.Lock()
        self.errors: list[str] = []
        self.counts: dict[str, int] = {}

    def count(self, what: str):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1

    def error(self, msg: str):
        with self.lock:
            self.errors.append(msg)


def check_429(ep: str, r: requests.Response):
    check(int(r.headers["Retry-After"]) >= 1, "429 without Retry-After", r.headers)
    j = r.json()
    if ep == "messages":
        check(j["type"] == "error" and j["error"]["type"] == "rate_limit_error", "429 schema", j)
    else:
        check(j["error"]["code"] == "queue_full", "429 schema", j)


def raw_request(url: str, path: str, body: dict, cut_body: bool):
    """Sends a request on a raw socket and hangs up without reading the answer (whole
    request) or before the body is complete (cut_body)."""
    host, port = url.removeprefix("http://").split(":")
    payload = json.dumps(body).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"anthropic-version: 2023-06-01\r\nContent-Length: {len(payload)}\r\n\r\n").encode()
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(head + (payload[: len(payload) // 2] if cut_body else payload))
        time.sleep(random.uniform(0.0, 0.3))


def client(url: str, seed: int, until: float, refs: dict, load: Load):
    rng = random.Random(seed)
    while time.monotonic() < until:
        ep = rng.choice(ENDPOINTS)
        pi = rng.randrange(len(PROMPTS))
        stream = rng.random() < 0.5
        greedy = rng.random() < 0.75
        max_tokens = rng.randint(1, REF_MAX)
        body = body_for(ep, PROMPTS[pi], max_tokens, stream, 0.0 if greedy else 0.9,
                        None if greedy else rng.randrange(1 << 30))
        action = rng.choices(["complete", "hangup", "abandon", "raw", "cut"], [70, 12, 8, 6, 4])[0]
        ctx = (ep, PROMPTS[pi], "stream" if stream else "plain", "greedy" if greedy else "sampled", action, seed)
        try:
            if action in ("raw", "cut"):
                raw_request(url, PATHS[ep], body, cut_body=action == "cut")
                load.count(action)
                continue
            if action == "hangup" and not stream:
                action = "abandon"
            timeout = (10, rng.uniform(0.2, 1.5)) if action == "abandon" else (10, 180)
            try:
                r = requests.post(url + PATHS[ep], json=body, headers=ANTHROPIC if ep == "messages" else None,
                                  stream=stream, timeout=timeout)
            except requests.exceptions.RequestException:
                if action != "abandon":
                    raise
                load.count("abandoned")
                load.count("no status read")
                continue
            with r:
                if r.status_code == 429:
                    check_429(ep, r)
                    load.count("429")
                    time.sleep(rng.uniform(0.05, 0.3))
                    continue
                if r.status_code != 200:
                    raise Bad(f"status {r.status_code}: {r.text[:300]} {ctx}")
                cut = rng.randint(1, 5) if action == "hangup" else None
                try:
                    a = read_response(ep, r, stream, cut)
                except requests.exceptions.RequestException:
                    if action != "abandon":
                        raise
                    load.count("abandoned")
                    continue
                if a is None:  # hung up after `cut` content events
                    load.count("hung up")
                    continue
                check_answer(a, max_tokens, refs[(ep, pi)] if greedy else None, ctx)
                load.count("completed")
        except (Bad, requests.RequestException, KeyError, ValueError, TypeError, OSError) as e:
            load.error(f"{type(e).__name__}: {e} {ctx}")


def run_load(url: str, seconds: float, refs: dict, seed0: int) -> Load:
    load = Load()
    until = time.monotonic() + seconds
    threads = [threading.Thread(target=client, args=(url, seed0 + i, until, refs, load)) for i in range(N_CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds + 240)
    assert not any(t.is_alive() for t in threads), "a client thread hangs"
    return load


def vm_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def load_server(rt_binary, package):
    s = start_rt(rt_binary, package, 2048, "--parallel", str(PARALLEL), "--max-queue", str(MAX_QUEUE),
                 "--cache-host-mb", "0", "-q")
    yield s
    assert s.stop() == 0, s.log()


def references(url: str) -> dict:
    """Greedy streamed answers of every (endpoint, prompt) at REF_MAX tokens (taken together:
    a greedy answer does not depend on its batch, test_scheduler.py checks that)."""
    def one(key):
        ep, pi = key
        with requests.post(url + PATHS[ep], json=body_for(ep, PROMPTS[pi], REF_MAX, True, 0.0, None),
                           headers=ANTHROPIC if ep == "messages" else None, stream=True, timeout=120) as r:
            a = read_response(ep, r, True)
        check_answer(a, REF_MAX, None, key)
        assert a["completion"] > 0, (key, a)
        return a

    keys = [(ep, pi) for ep in ENDPOINTS for pi in range(len(PROMPTS))]
    with cf.ThreadPoolExecutor(PARALLEL) as ex:
        return dict(zip(keys, ex.map(one, keys)))


def test_32_clients_mixed_load_with_faults(load_server):
    url, pid = load_server.base_url, load_server.proc.pid
    t0 = time.monotonic()
    refs = references(url)
    print(f"references: {time.monotonic() - t0:.1f}s")
    warm = run_load(url, WARMUP_S, refs, seed0=1000)
    assert not warm.errors, f"{len(warm.errors)} bad answers in the warm-up, e.g.:\n" + "\n".join(warm.errors[:10])
    assert wait_for(lambda: metric(scrape_metrics(url), "swizzle_running_sequences") == 0, 30)
    rss0 = vm_rss_kib(pid)
    m0 = scrape_metrics(url)

    load = run_load(url, LOAD_S, refs, seed0=2000)
    print(f"load phase {LOAD_S:.0f}s: {load.counts}")
    assert not load.errors, f"{len(load.errors)} bad answers, e.g.:\n" + "\n".join(load.errors[:10])
    assert load_server.alive()
    # Enough happened to mean something, each fault kind included.
    assert load.counts.get("completed", 0) >= 20, load.counts
    for kind in ("hung up", "abandoned", "raw", "cut"):
        assert load.counts.get(kind, 0) >= 1, (kind, load.counts)
    assert load.counts.get("429", 0) >= 1, f"32 clients never overloaded --parallel 8 --max-queue 16: {load.counts}"

    # Everything drains: cancelled and abandoned requests leave within a step or two.
    assert wait_for(lambda: (lambda m: metric(m, "swizzle_running_sequences") == 0 and
                             metric(m, "swizzle_queue_length") == 0)(scrape_metrics(url)), 20), scrape_metrics(url)
    m1 = scrape_metrics(url)
    rejected = metric(m1, "swizzle_requests_rejected_total") - metric(m0, "swizzle_requests_rejected_total")
    unread = load.counts.get("raw", 0) + load.counts.get("no status read", 0)  # their status is unknown
    assert load.counts["429"] <= rejected <= load.counts["429"] + unread, (rejected, load.counts)
    total = metric(m1, "swizzle_kv_pages", state="total")
    free = metric(m1, "swizzle_kv_pages", state="free")
    cached = metric(m1, "swizzle_prefix_cache_blocks", tier="device")
    assert total > 0 and free + cached == total, f"pages: total {total}, free {free}, cached blocks {cached}"
    # The server's own count of its answers: none 5xx (cut bodies and hang-ups included).
    statuses = {dict(labels)["endpoint"] + " " + dict(labels)["status"]: v
                for (name, labels), v in m1.items() if name == "swizzle_requests_total"}
    assert any(k.endswith(" 200") for k in statuses), statuses
    assert not [k for k, v in statuses.items() if k.split()[1].startswith("5") and v > 0], statuses
    print("responses by status:", statuses)

    rss1 = vm_rss_kib(pid)
    print(f"VmRSS after warm-up {rss0 / 1024:.1f} MiB, after load {rss1 / 1024:.1f} MiB")
    assert rss1 - rss0 <= RSS_BOUND_MIB * 1024, f"VmRSS grew {(rss1 - rss0) / 1024:.1f} MiB (bound {RSS_BOUND_MIB})"
    # And it still answers right.
    r = requests.get(url + "/health", timeout=5)
    assert r.status_code == 200
    with requests.post(url + PATHS["chat"], json=body_for("chat", PROMPTS[0], REF_MAX, False, 0.0, None),
                       timeout=120) as r:
        check_answer(read_response("chat", r, False), REF_MAX, refs[("chat", 0)], "after the load")
