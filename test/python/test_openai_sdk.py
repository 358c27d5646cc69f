"""`swizzle-rt serve` with a real compiled model, driven by the official `openai` SDK.

Needs the real engine (swz_engine) and a package: see conftest.py for SWZ_RT,
SWZ_PACKAGE / SWZ_SWIZZLEC / SWZ_GGUF and SWZ_CTX. Greedy decoding (temperature 0) is
deterministic, so the streamed text must equal the non-streamed text byte for byte.
"""
from __future__ import annotations

import json
import subprocess
import threading

import openai
import pytest
import requests

from conftest import openai_client, start_rt

PROMPTS = [
    "What is the capital of France? Answer in one sentence.",
    "Write the word 'hello' in Chinese, Japanese and Korean, then add three emoji.",
    "List three prime numbers.",
]


def msgs(text: str):
    return [{"role": "user", "content": text}]


def stream_text(client, **kwargs):
    deltas, finish, usage = [], None, None
    for chunk in client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs):
        if chunk.usage is not None:
            usage = chunk.usage
        if chunk.choices:
            c = chunk.choices[0]
            if c.delta.content:
                deltas.append(c.delta.content)
            if c.finish_reason:
                finish = c.finish_reason
    return "".join(deltas), finish, usage, deltas


def test_health_and_models(server, client, package):
    r = requests.get(server.base_url + "/health", timeout=10)
    # The backend that runs the package's target (SWZ_PACKAGE may be a GPU package).
    target = json.loads((package / "manifest.json").read_text())["target"]
    want = "cpu (" if target == "cpu" else "vulkan (" if target == "spirv" else "cuda ("
    assert r.status_code == 200 and r.json()["status"] == "ok" and r.json()["backend"].startswith(want), r.text
    ids = [m.id for m in client.models.list().data]
    assert len(ids) == 1 and ids[0]


def test_non_stream_response_shape_usage_and_headers(client):
    raw = client.chat.completions.with_raw_response.create(model="anything", messages=msgs(PROMPTS[0]),
                                                           temperature=0, max_tokens=24)
    r = raw.parse()
    assert r.id.startswith("chatcmpl-")
    assert r.object == "chat.completion"
    assert r.model == client.models.list().data[0].id
    choice = r.choices[0]
    assert choice.message.role == "assistant"
    assert isinstance(choice.message.content, str) and choice.message.content.strip()
    u = r.usage
    assert u.prompt_tokens > 0 and 0 < u.completion_tokens <= 24
    # "length" exactly when the answer used all of max_tokens (greedy: no other way to end)
    assert choice.finish_reason == ("length" if u.completion_tokens == 24 else "stop"), (choice.finish_reason, u)
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens
    cached = u.prompt_tokens_details.cached_tokens
    assert 0 <= cached <= u.prompt_tokens
    assert int(raw.headers["x-swizzle-cache-hit-tokens"]) == cached
    assert int(raw.headers["x-swizzle-uncached-tokens"]) == u.prompt_tokens - cached


@pytest.mark.parametrize("prompt", PROMPTS)
def test_stream_joins_to_non_stream_text_greedy(client, prompt):
    kw = dict(model="m", messages=msgs(prompt), temperature=0, max_tokens=48)
    r = client.chat.completions.create(**kw)
    text, finish, usage, deltas = stream_text(client, **kw)
    assert text == r.choices[0].message.content
    assert finish == r.choices[0].finish_reason
    assert usage.prompt_tokens == r.usage.prompt_tokens
    assert usage.completion_tokens == r.usage.completion_tokens
    # Cutting a character between deltas would have put U+FFFD into the joined text.
    assert "".join(deltas).encode() == r.choices[0].message.content.encode()


def test_stream_headers(server):
    r = requests.post(server.base_url + "/v1/chat/completions", stream=True, timeout=60,
                      json={"model": "m", "messages": msgs("Hi"), "stream": True, "max_tokens": 4})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    assert int(r.headers["x-swizzle-cache-hit-tokens"]) >= 0
    assert int(r.headers["x-swizzle-uncached-tokens"]) > 0
    lines = [l for l in r.iter_lines(decode_unicode=False) if l]
    assert lines[-1] == b"data: [DONE]"
    assert all(l.startswith(b"data: ") for l in lines)


def test_max_tokens_gives_length(client):
    r = client.chat.completions.create(model="m", messages=msgs("Write a long story about a dragon."),
                                       temperature=0, max_tokens=3)
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 3
    r = client.chat.completions.create(model="m", messages=msgs("Write a long story about a dragon."),
                                       temperature=0, max_tokens=2, max_completion_tokens=5)
    assert r.usage.completion_tokens == 5


def test_ignore_eos_generates_past_the_end_of_the_answer(client):
    """`ignore_eos` (the vLLM / llama-server extension): the end-of-generation token the
    greedy answer ends with is generated like any other token, so the answer runs on to
    max_tokens; up to that token the text is the plain answer's."""
    kw = dict(model="m", messages=msgs(PROMPTS[0]), temperature=0)
    plain = client.chat.completions.create(max_tokens=200, **kw)
    assert plain.choices[0].finish_reason == "stop", plain
    k = plain.usage.completion_tokens
    longer = client.chat.completions.create(max_tokens=k + 8, extra_body={"ignore_eos": True}, **kw)
    assert longer.choices[0].finish_reason == "length"
    assert longer.usage.completion_tokens == k + 8
    assert longer.choices[0].message.content.startswith(plain.choices[0].message.content)
    assert len(longer.choices[0].message.content) > len(plain.choices[0].message.content)
    text, finish, usage, _ = stream_text(client, max_tokens=k + 8, extra_body={"ignore_eos": True}, **kw)
    assert (text, finish, usage.completion_tokens) == (longer.choices[0].message.content, "length", k + 8)
    with pytest.raises(openai.BadRequestError, match="ignore_eos"):
        client.chat.completions.create(max_tokens=4, extra_body={"ignore_eos": "yes"}, **kw)


def test_seed_makes_sampling_reproducible(client):
    kw = dict(model="m", messages=msgs("Tell me a fun fact."), temperature=1.0, top_p=0.95, seed=1234, max_tokens=24)
    a = client.chat.completions.create(**kw).choices[0].message.content
    b = client.chat.completions.create(**kw).choices[0].message.content
    assert a == b


@pytest.mark.parametrize("kwargs,param", [
    ({"n": 17}, "n"),
    ({"temperature": 3}, "temperature"),
    ({"top_p": 1.5}, "top_p"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
])
def test_invalid_requests_raise_bad_request(client, kwargs, param):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(**{"model": "m", "messages": msgs("hi"), **kwargs})
    assert e.value.param == param
    assert e.value.type == "invalid_request_error"


@pytest.mark.parametrize("stream", [False, True])
def test_prompt_longer_than_context_is_400(client, n_ctx, stream):
    long = msgs("hello " * (n_ctx + 16))
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=long, stream=stream, max_tokens=4)
    assert e.value.code == "context_length_exceeded"
    assert f"{n_ctx} tokens" in e.value.message


def test_client_disconnect_mid_stream_then_server_still_serves(server, client):
    stream = client.chat.completions.create(model="m", messages=msgs("Count from 1 to 500, one number per line."),
                                            stream=True, temperature=0, max_tokens=400)
    got = 0
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            got += 1
            if got == 3:
                break
    stream.close()
    assert server.wait_for_log("(client disconnected)", timeout=60), server.log()[-2000:]
    r = client.chat.completions.create(model="m", messages=msgs("Say hi."), max_tokens=4)
    assert r.choices[0].message.content
    assert server.alive()


def test_concurrent_greedy_requests_agree(client):
    kw = dict(model="m", messages=msgs(PROMPTS[2]), temperature=0, max_tokens=16)
    want = client.chat.completions.create(**kw).choices[0].message.content
    out, errors = [], []

    def one():
        try:
            out.append(client.chat.completions.create(**kw).choices[0].message.content)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert out == [want] * 3


def test_run_subcommand_prints_the_same_greedy_text(rt_binary, package, n_ctx, client):
    prompt = PROMPTS[0]
    r = subprocess.run([str(rt_binary), "run", str(package), "-p", prompt, "-n", "16", "--temp", "0", "-c", str(n_ctx)],
                       capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert r.stdout.endswith(b"\n")
    served = client.chat.completions.create(model="m", messages=msgs(prompt), temperature=0, max_tokens=16)
    assert r.stdout[:-1].decode() == served.choices[0].message.content
    assert b"generated:" in r.stderr and b"tok/s" in r.stderr


def test_api_key_required_when_configured(rt_binary, package, n_ctx):
    s = start_rt(rt_binary, package, n_ctx, "--api-key", "sk-test-123")
    try:
        with pytest.raises(openai.AuthenticationError) as e:
            openai_client(s.base_url, api_key="wrong").chat.completions.create(model="m", messages=msgs("hi"),
                                                                               max_tokens=2)
        assert e.value.code == "invalid_api_key"
        ok = openai_client(s.base_url, api_key="sk-test-123").chat.completions.create(
            model="m", messages=msgs("hi"), max_tokens=2)
        assert ok.usage.completion_tokens >= 1
        assert requests.get(s.base_url + "/health", timeout=10).status_code == 200
    finally:
        assert s.stop() == 0, s.log()
