"""The prefix cache through a real `swizzle-rt serve` (compiled default model), driven by
the official `openai` SDK and by raw sockets that hang up mid-prefill.

Every warm answer is compared with the same request on a second server started with
`--no-prefix-cache` (a cold run): greedy output must be identical byte for byte.
Environment: see conftest.py (SWZ_RT, SWZ_PACKAGE, SWZ_REQUIRE).
"""
from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest

from conftest import openai_client, start_rt

CTX = 2048
MAX_TOKENS = 12

# A long shared system prompt (an agent's instructions plus a file), ~520 tokens.
SYSTEM = (
    "You are a careful coding assistant. Follow the repository conventions, explain briefly, "
    "and answer with code when asked.\n\n"
    + "\n".join(
        f"def helper_{i}(values):\n    \"\"\"Return the sum of squares of values above {i}.\"\"\"\n"
        f"    return sum(v * v for v in values if v > {i})\n"
        for i in range(12)
    )
)
QUESTIONS = [
    "What does helper_3 return for [1, 5, 7]?",
    "Rename helper_10 to sum_sq_above_10.",
    "Which helper ignores the most values?",
    "Write a test for helper_0.",
]


def msgs(question: str, system: str = SYSTEM):
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


@pytest.fixture(scope="module")
def warm(rt_binary, package):
    s = start_rt(rt_binary, package, CTX, "--cache-ttl", "600")
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture(scope="module")
def cold(rt_binary, package):
    s = start_rt(rt_binary, package, CTX, "--no-prefix-cache")
    yield s
    assert s.stop() == 0, s.log()


def complete(server, messages, stream=False):
    """(text, cached_tokens from usage, prompt_tokens, header hit, header uncached)."""
    client = openai_client(server.base_url)
    if not stream:
        raw = client.chat.completions.with_raw_response.create(model="m", messages=messages, temperature=0,
                                                               max_tokens=MAX_TOKENS)
        r = raw.parse()
        return (r.choices[0].message.content, r.usage.prompt_tokens_details.cached_tokens, r.usage.prompt_tokens,
                int(raw.headers["x-swizzle-cache-hit-tokens"]), int(raw.headers["x-swizzle-uncached-tokens"]))
    with client.chat.completions.with_streaming_response.create(
            model="m", messages=messages, temperature=0, max_tokens=MAX_TOKENS, stream=True,
            stream_options={"include_usage": True}) as raw:
        text, usage = [], None
        for chunk in raw.parse():
            if chunk.usage is not None:
                usage = chunk.usage
            if chunk.choices and chunk.choices[0].delta.content:
                text.append(chunk.choices[0].delta.content)
        return ("".join(text), usage.prompt_tokens_details.cached_tokens, usage.prompt_tokens,
                int(raw.headers["x-swizzle-cache-hit-tokens"]), int(raw.headers["x-swizzle-uncached-tokens"]))


def test_cold_call_then_repeat_reports_every_token_but_the_last_cached(warm, cold):
    system = f"Session {uuid.uuid4()}.\n" + SYSTEM  # a prefix no earlier request has sent
    m = msgs(QUESTIONS[0], system)
    text0, cached0, prompt0, hit0, uncached0 = complete(warm, m)
    assert cached0 == 0 and hit0 == 0 and uncached0 == prompt0
    ref = complete(cold, m)[0]
    assert text0 == ref
    for stream in (False, True):
        text, cached, prompt, hit, uncached = complete(warm, m, stream=stream)
        assert text == ref
        assert prompt == prompt0
        # Whole blocks, then the start of the partial last one (token-granular reuse); the
        # last prompt position is always evaluated for its logits.
        assert cached == prompt - 1
        assert hit == cached and uncached == prompt - cached  # headers (stream: sent before prefill) agree
    # Cold server: never anything cached.
    assert complete(cold, m)[1] == 0


def _hang_up_mid_prefill(base_url: str, body: dict, out: dict):
    """Sends a streaming request, reads the response headers (sent before prefill starts),
    then closes the connection while the server is still evaluating the prompt."""
    host, port = base_url.removeprefix("http://").split(":")
    payload = json.dumps(body).encode()
    s = socket.create_connection((host, int(port)), timeout=300)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Authorization: Bearer unused\r\nContent-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            break
        head += chunk
    out["head"] = head.decode(errors="replace")
    s.close()


def test_concurrent_shared_prefix_with_clients_hanging_up_mid_prefill(warm, cold):
    # Survivors: the shared system prompt plus different questions, streamed and not.
    survivors = [(msgs(q), i % 2 == 1) for i, q in enumerate(QUESTIONS)]
    # Quitters: the same prefix plus a long tail (several 512-token prefill chunks).
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    tail = " ".join(words[i % 8] for i in range(500))  # ~600 tokens: with the prefix, 3 prefill chunks
    quitters = [msgs(f"Sort these: {tail} (variant {k})") for k in range(3)]

    results: dict[int, tuple] = {}
    errors: list[BaseException] = []
    hung: list[dict] = [{} for _ in quitters]

    def survivor(i):
        try:
            results[i] = complete(warm, survivors[i][0], stream=survivors[i][1])
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    def quitter(k):
        try:
            _hang_up_mid_prefill(warm.base_url, {"model": "m", "messages": quitters[k], "stream": True,
                                                 "temperature": 0, "max_tokens": MAX_TOKENS}, hung[k])
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    # The first survivor runs alone and publishes the shared prefix; the others and the
    # quitters are admitted together after it (cached_tokens is fixed at admission).
    survivor(0)
    threads = [threading.Thread(target=quitter, args=(k,)) for k in range(len(quitters))]
    threads += [threading.Thread(target=survivor, args=(i,)) for i in range(1, len(survivors))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=900)
    assert not errors, errors
    assert all(not t.is_alive() for t in threads)

    # Each quitter got its headers (with the cache counts) and was cancelled before its
    # first token: prefill stopped, not only generation.
    for h in hung:
        assert h["head"].startswith("HTTP/1.1 200"), h
        assert "X-Swizzle-Cache-Hit-Tokens" in h["head"]
    def quitter_lines():
        return [line for line in warm.log().splitlines() if "(client disconnected)" in line]

    deadline = time.monotonic() + 300
    while len(quitter_lines()) < len(quitters) and time.monotonic() < deadline:
        time.sleep(0.2)
    lines = quitter_lines()
    assert len(lines) == len(quitters), warm.log()[-3000:]
    assert all("completion=0 " in line for line in lines), lines

    # Every survivor equals a serial cold run, and its counts are consistent.
    for i, (m, _) in enumerate(survivors):
        text, cached, prompt, hit, uncached = results[i]
        assert text == complete(cold, m)[0], f"survivor {i} differs from the cold run"
        assert 0 <= cached <= prompt - 1 and hit == cached and uncached == prompt - cached
    assert all(results[i][1] >= 320 for i in range(1, len(survivors)))  # the shared system prompt hit

    # The blocks the quitters computed before hanging up are exact: a full quitter
    # request now hits them and still equals the cold run.
    text, cached, prompt, _, _ = complete(warm, quitters[0])
    assert cached > 0
    assert text == complete(cold, quitters[0])[0]


def test_disk_tier_survives_restart_and_ignores_corrupt_files(rt_binary, package, cold, tmp_path):
    cache_dir = tmp_path / "kv"
    m = msgs(QUESTIONS[2], f"Disk session {uuid.uuid4()}.\n" + SYSTEM)
    ref = complete(cold, m)[0]
    s = start_rt(rt_binary, package, CTX, "--cache-dir", str(cache_dir))
    try:
        text, cached, prompt, _, _ = complete(s, m)
        assert cached == 0 and text == ref
    finally:
        assert s.stop() == 0, s.log()
    files = sorted(cache_dir.glob("*/*/*.kv"))  # model / tenant (the default one) / block
    assert len(files) == prompt // 64  # every whole prompt block; the partial last one stays in RAM

    s = start_rt(rt_binary, package, CTX, "--cache-dir", str(cache_dir))  # restart: RAM tiers empty
    try:
        text, cached, prompt2, _, _ = complete(s, m)
        assert text == ref
        assert cached == min(64 * (prompt // 64), prompt - 1)  # whole blocks only: a partial one is never on disk
    finally:
        assert s.stop() == 0, s.log()

    # Corrupt every file (one flipped byte of its sealed header, and one of its page): a
    # restarted server rejects them with a log line, evaluates everything, and still answers
    # exactly.
    for f in files:
        data = bytearray(f.read_bytes())
        data[100] ^= 0xFF
        data[-100] ^= 0xFF
        f.write_bytes(bytes(data))
    s = start_rt(rt_binary, package, CTX, "--cache-dir", str(cache_dir))
    try:
        text, cached, _, _, _ = complete(s, m)
        assert text == ref
        assert cached == 0
        assert "ignoring" in s.log() and "does not authenticate" in s.log()
    finally:
        assert s.stop() == 0, s.log()
