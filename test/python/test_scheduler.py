"""The scheduler behind `swizzle-rt serve` (issue 14 items 1-4), on the real default model:

- 8 concurrent greedy requests (chat, streamed and not) give exactly the text each gives
  alone, and /metrics shows steps that carried several sequences (continuous batching);
- /health and /metrics answer within 200 ms while 8 streams run;
- a client that disconnects mid-stream, or while its request waits in the queue, is gone
  from the running set / queue within a step and its KV pages are free again (/metrics);
- with every slot taken and the queue full, a request gets 429 with Retry-After in its
  API's error schema (OpenAI and Anthropic), and the rejection is counted;
- n > 1 choices (issue 14 item 2) through the OpenAI SDK: chat n=3 streamed and not,
  completions n=2: each choice equals the request run alone with that choice's seed
  (greedy: the single answer), /metrics shows the prompt prefilled once, streamed chunks
  of the choices interleave with their `index`, a client that leaves frees every choice's
  pages, and a full queue is one 429 before any header.
"""
from __future__ import annotations

import concurrent.futures as cf
import json
import socket
import threading
import time

import pytest
import requests

from conftest import metric, openai_client, scrape_metrics, start_rt, wait_for

TOPICS = ["a binary search in C", "why the sky is blue", "a haiku about compilers",
          "the difference between TCP and UDP", "how to reverse a linked list in Python",
          "three uses of a hash map", "what a KV cache is in a transformer", "the rules of tic-tac-toe"]
# A completion prompt the model goes on repeating: generation that lasts (the default model
# continues it to max_tokens).
COUNTING = "la " * 100


def chat(base_url: str, text: str, max_tokens: int, stream: bool) -> str:
    body = {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens,
            "temperature": 0, "stream": stream}
    r = requests.post(base_url + "/v1/chat/completions", json=body, timeout=300, stream=stream)
    assert r.status_code == 200, r.text
    if not stream:
        return r.json()["choices"][0]["message"]["content"]
    text = ""
    for line in r.iter_lines():
        if line.startswith(b"data: {"):
            for c in json.loads(line[6:])["choices"]:
                text += c["delta"].get("content") or ""
    return text


@pytest.fixture(scope="module")
def batch_server(rt_binary, package):
    # A small token budget so prompts are chunked next to decoding streams.
    s = start_rt(rt_binary, package, 1024, "--parallel", "8", "--batch-tokens", "64", "--no-prefix-cache")
    yield s
    assert s.stop() == 0, s.log()


def test_concurrent_greedy_equals_alone(batch_server):
    url = batch_server.base_url
    prompts = [f"Explain {t}." for t in TOPICS]
    alone = [chat(url, p, 20, stream=False) for p in prompts]
    assert all(alone)
    before = scrape_metrics(url)
    with cf.ThreadPoolExecutor(8) as ex:
        together = list(ex.map(lambda i: chat(url, prompts[i], 20, stream=i % 2 == 1), range(8)))
    assert together == alone
    after = scrape_metrics(url)
    steps = metric(after, "swizzle_batch_sequences_count") - metric(before, "swizzle_batch_sequences_count")
    single = (metric(after, "swizzle_batch_sequences_bucket", le="1.0") -
              metric(before, "swizzle_batch_sequences_bucket", le="1.0"))
    assert steps > 0 and single < steps, "some steps carried several sequences"
    assert metric(after, "swizzle_running_sequences") == 0
    assert metric(after, "swizzle_queue_length") == 0


def test_health_and_metrics_answer_fast_while_8_streams_run(batch_server):
    url = batch_server.base_url
    started = threading.Barrier(9)
    stop = threading.Event()

    def stream(i: int):
        body = {"model": "m", "messages": [{"role": "user", "content": f"Write a long story about {TOPICS[i]}."}],
                "max_tokens": 200, "temperature": 0, "stream": True}
        with requests.post(url + "/v1/chat/completions", json=body, timeout=300, stream=True) as r:
            assert r.status_code == 200
            first = True
            for line in r.iter_lines():
                if first and line.startswith(b"data: {"):
                    first = False
                    started.wait(timeout=120)
                if stop.is_set():
                    return

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    try:
        started.wait(timeout=120)
        m = scrape_metrics(url)
        assert metric(m, "swizzle_running_sequences") >= 1
        worst = 0.0
        for _ in range(10):
            for path in ("/health", "/metrics"):
                t0 = time.monotonic()
                r = requests.get(url + path, timeout=10)
                worst = max(worst, time.monotonic() - t0)
                assert r.status_code == 200
            time.sleep(0.05)
        assert worst < 0.2, f"/health or /metrics took {worst:.3f}s while 8 streams ran"
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
    assert wait_for(lambda: metric(scrape_metrics(url), "swizzle_running_sequences") == 0, 10)


def test_disconnect_mid_stream_frees_the_pages(batch_server):
    url = batch_server.base_url
    assert wait_for(lambda: metric(scrape_metrics(url), "swizzle_running_sequences") == 0, 30)
    total = metric(scrape_metrics(url), "swizzle_kv_pages", state="total")
    assert metric(scrape_metrics(url), "swizzle_kv_pages", state="free") == total
    body = {"prompt": COUNTING, "max_tokens": 700, "temperature": 0, "stream": True}
    r = requests.post(url + "/v1/completions", json=body, timeout=300, stream=True)
    assert r.status_code == 200
    it = r.iter_lines()
    got = 0
    for line in it:
        if line.startswith(b"data: {"):
            got += 1
            if got == 3:
                break
    m = scrape_metrics(url)
    assert metric(m, "swizzle_running_sequences") == 1
    assert metric(m, "swizzle_kv_pages", state="free") < total
    r.close()  # the client goes away
    assert wait_for(lambda: metric(scrape_metrics(url), "swizzle_running_sequences") == 0, 2.0)
    assert metric(scrape_metrics(url), "swizzle_kv_pages", state="free") == total


MASK64 = (1 << 64) - 1


def choice_seed(seed: int, i: int) -> int:
    """The engine's seed of choice i (engine::choice_seed): SplitMix64 of seed + i * φ64."""
    if i == 0:
        return seed
    z = (seed + i * 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


# A prompt of a few hundred tokens (several pages, the last one partial).
N_PROMPT = ("You review code. " + " ".join(f"Rule {i}: keep {TOPICS[i % 8]} simple and tested." for i in range(24)) +
            " Now give one short tip about Python.")


def test_chat_n_choices_share_one_prefill(batch_server):
    url = batch_server.base_url
    client = openai_client(url)
    msgs = [{"role": "user", "content": N_PROMPT}]
    kw = dict(model="m", messages=msgs, temperature=0.9, top_p=0.95, max_tokens=16, seed=4242)
    before = scrape_metrics(url)
    r = client.chat.completions.create(n=3, **kw)
    after = scrape_metrics(url)
    assert r.usage.prompt_tokens > 200
    # One prefill for the three choices (no prefix cache on this server).
    assert metric(after, "swizzle_prefill_rows_total") - metric(before, "swizzle_prefill_rows_total") == r.usage.prompt_tokens
    assert (metric(after, "swizzle_prefix_cache_miss_tokens_total") -
            metric(before, "swizzle_prefix_cache_miss_tokens_total")) == r.usage.prompt_tokens
    assert [c.index for c in r.choices] == [0, 1, 2]
    # Each choice is what the request gives alone with that choice's seed.
    refs = []
    for i in range(3):
        one = client.chat.completions.create(n=1, **{**kw, "seed": choice_seed(4242, i)})
        refs.append((one.choices[0].message.content, one.choices[0].finish_reason))
    assert [(c.message.content, c.finish_reason) for c in r.choices] == refs
    assert len({t for t, _ in refs}) >= 2, refs
    assert r.usage.completion_tokens == sum(
        client.chat.completions.create(n=1, **{**kw, "seed": choice_seed(4242, i)}).usage.completion_tokens for i in range(3))

    # Streamed: the choices' chunks interleave, each with its index; joined they are the same.
    before = scrape_metrics(url)
    stream = client.chat.completions.create(n=3, stream=True, stream_options={"include_usage": True}, **kw)
    order, text, finish, usage = [], {0: "", 1: "", 2: ""}, {}, None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            if c.delta.content:
                order.append(c.index)
                text[c.index] += c.delta.content
            if c.finish_reason:
                finish[c.index] = c.finish_reason
    after = scrape_metrics(url)
    assert [(text[i], finish[i]) for i in range(3)] == refs
    assert order != sorted(order), "the choices' content chunks interleave"
    assert usage.prompt_tokens == r.usage.prompt_tokens and usage.completion_tokens == r.usage.completion_tokens
    assert metric(after, "swizzle_prefill_rows_total") - metric(before, "swizzle_prefill_rows_total") == r.usage.prompt_tokens

    # Greedy: n identical choices, each the single request's answer.
    g1 = client.chat.completions.create(model="m", messages=msgs, temperature=0, max_tokens=16)
    g3 = client.chat.completions.create(model="m", messages=msgs, temperature=0, max_tokens=16, n=3)
    assert [c.message.content for c in g3.choices] == [g1.choices[0].message.content] * 3
    m = scrape_metrics(url)
    assert metric(m, "swizzle_running_sequences") == 0
    assert metric(m, "swizzle_kv_pages", state="free") == metric(m, "swizzle_kv_pages", state="total")


def test_completions_n_choices_share_one_prefill(batch_server):
    url = batch_server.base_url
    client = openai_client(url)
    prompt = N_PROMPT + "\nTip:"
    kw = dict(model="m", prompt=prompt, temperature=0.8, max_tokens=12, seed=99)
    before = scrape_metrics(url)
    r = client.completions.create(n=2, **kw)
    after = scrape_metrics(url)
    assert metric(after, "swizzle_prefill_rows_total") - metric(before, "swizzle_prefill_rows_total") == r.usage.prompt_tokens
    refs = [client.completions.create(n=1, **{**kw, "seed": choice_seed(99, i)}).choices[0].text for i in range(2)]
    assert [c.text for c in r.choices] == refs
    assert refs[0] != refs[1]
    # Streamed, with two prompts: index = prompt * n + j, each choice as its reference.
    other = "def fibonacci(n):"
    stream = client.completions.create(model="m", prompt=[prompt, other], temperature=0.8, max_tokens=12, seed=99, n=2,
                                       stream=True)
    text = {}
    for chunk in stream:
        for c in chunk.choices:
            text[c.index] = text.get(c.index, "") + c.text
    assert sorted(text) == [0, 1, 2, 3]
    assert [text[0], text[1]] == refs
    assert [text[2], text[3]] == [client.completions.create(model="m", prompt=other, temperature=0.8, max_tokens=12,
                                                            seed=choice_seed(99, i)).choices[0].text for i in range(2)]


def test_n_choices_client_leaving_frees_every_page(batch_server):
    url = batch_server.base_url
    assert wait_for(lambda: metric(scrape_metrics(url), "swizzle_running_sequences") == 0, 30)
    total = metric(scrape_metrics(url), "swizzle_kv_pages", state="total")
    body = {"prompt": COUNTING, "max_tokens": 700, "temperature": 0, "n": 4, "stream": True}
    r = requests.post(url + "/v1/completions", json=body, timeout=300, stream=True)
    assert r.status_code == 200
    seen = set()
    it = r.iter_lines()
    for line in it:
        if line.startswith(b"data: {"):
            seen.update(c["index"] for c in json.loads(line[6:])["choices"])
            if len(seen) == 4:
                break
    m = scrape_metrics(url)
    assert metric(m, "swizzle_running_sequences") == 4, "the four choices decode together"
    assert metric(m, "swizzle_kv_pages", state="free") < total
    r.close()  # the client goes away: every choice ends
    assert wait_for(lambda: metric(scrape_metrics(url), "swizzle_running_sequences") == 0, 2.0)
    assert metric(scrape_metrics(url), "swizzle_kv_pages", state="free") == total


@pytest.fixture(scope="module")
def one_slot_server(rt_binary, package):
    s = start_rt(rt_binary, package, 1024, "--parallel", "1", "--max-queue", "1", "--no-prefix-cache")
    yield s
    assert s.stop() == 0, s.log()


def long_stream(url: str):
    """A streamed completion that keeps the model busy for hundreds of tokens (it goes on
    repeating), read up to its first token; close() it to end it."""
    body = {"prompt": COUNTING, "max_tokens": 700, "temperature": 0, "stream": True}
    r = requests.post(url + "/v1/completions", json=body, timeout=300, stream=True)
    assert r.status_code == 200
    # The line iterator stays referenced: a discarded one closes the connection (urllib3).
    r.lines = r.iter_lines()
    for line in r.lines:
        if line.startswith(b"data: {"):
            break
    return r


def test_queued_client_that_leaves_is_dropped(one_slot_server):
    url = one_slot_server.base_url
    assert wait_for(lambda: metric(scrape_metrics(url), "swizzle_running_sequences") == 0, 30)
    running = long_stream(url)
    try:
        # A second request waits for the only slot; its client hangs up while it waits.
        host, port = url.removeprefix("http://").split(":")
        payload = json.dumps({"model": "m", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 5,
                              "temperature": 0}).encode()
        s = socket.create_connection((host, int(port)), timeout=30)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
        assert wait_for(lambda: metric(scrape_metrics(url), "swizzle_queue_length") == 1, 10)
        assert metric(scrape_metrics(url), "swizzle_running_sequences") == 1
        s.close()
        assert wait_for(lambda: metric(scrape_metrics(url), "swizzle_queue_length") == 0, 2.0)
        assert metric(scrape_metrics(url), "swizzle_running_sequences") == 1  # the running one is untouched
    finally:
        running.close()
    assert wait_for(lambda: metric(scrape_metrics(url), "swizzle_running_sequences") == 0, 2.0)


def test_queue_full_is_429_with_retry_after(one_slot_server):
    url = one_slot_server.base_url
    assert wait_for(lambda: metric(scrape_metrics(url), "swizzle_running_sequences") == 0, 10)
    rejected0 = metric(scrape_metrics(url), "swizzle_requests_rejected_total")
    running = long_stream(url)
    queued_result = {}

    def queued():  # takes the one queue place
        body = {"model": "m", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 3, "temperature": 0}
        queued_result["r"] = requests.post(url + "/v1/chat/completions", json=body, timeout=300)

    t = threading.Thread(target=queued)
    t.start()
    try:
        assert wait_for(lambda: metric(scrape_metrics(url), "swizzle_queue_length") == 1, 10)
        body = {"model": "m", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 3, "temperature": 0}
        r = requests.post(url + "/v1/chat/completions", json=body, timeout=30)
        assert r.status_code == 429, r.text
        assert int(r.headers["Retry-After"]) >= 1
        err = r.json()["error"]
        assert err["code"] == "queue_full" and "capacity" in err["message"]
        r = requests.post(url + "/v1/messages", json={"model": "m", "max_tokens": 3,
                                                      "messages": [{"role": "user", "content": "Say hi."}]},
                          headers={"anthropic-version": "2023-06-01"}, timeout=30)
        assert r.status_code == 429, r.text
        assert int(r.headers["Retry-After"]) >= 1
        assert r.json()["type"] == "error" and r.json()["error"]["type"] == "rate_limit_error"
        r = requests.post(url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 3}, timeout=30)
        assert r.status_code == 429, r.text
        assert int(r.headers["Retry-After"]) >= 1
        # Streamed too: the 429 comes before any 200 headers, in the same schema.
        r = requests.post(url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 3, "stream": True}, timeout=30)
        assert r.status_code == 429, r.text
        assert int(r.headers["Retry-After"]) >= 1
        assert r.json()["error"]["code"] == "queue_full"
        # n choices are one request: one 429, before any header, counted once.
        r = requests.post(url + "/v1/chat/completions", json={**body, "n": 3, "stream": True}, timeout=30)
        assert r.status_code == 429, r.text
        assert r.json()["error"]["code"] == "queue_full"
        assert metric(scrape_metrics(url), "swizzle_requests_rejected_total") - rejected0 == 5
    finally:
        running.close()
        t.join(timeout=120)
    assert queued_result["r"].status_code == 200  # the queued one ran once the slot was free
    # With the slot free again, requests are served.
    assert chat(url, "Say hi.", 3, stream=False) is not None
