"""The OpenAI wire format as the official `openai` SDK sees it, against the real HTTP
layer (swz_server) over a scripted engine (swz_fake_serve), so every value is known:
the completion is "Hello 😀 世界! 🇫🇷 done." delivered as 10 byte pieces that cut the
emoji, 世 and the flag's code points; the prompt "user:hi\\n" + 2 tokens = 10 tokens;
the context is 64 tokens.
"""
from __future__ import annotations

import threading

import openai
import pytest
import requests

TEXT = "Hello 😀 世界! 🇫🇷 done."
# The engine's pieces are b"Hel", b"lo", b" \xf0\x9f", b"\x98", b"\x80 \xe4", ... Each
# delta may only carry whole characters, so these are the deltas the server must send.
DELTAS = ["Hel", "lo", " ", "😀 ", "世界", "!", " 🇫", "🇷", " done."]
HI = [{"role": "user", "content": "hi"}]


def collect(stream):
    deltas, finish, usage, roles, n_chunks = [], None, None, [], 0
    for chunk in stream:
        n_chunks += 1
        assert chunk.object == "chat.completion.chunk"
        assert chunk.id.startswith("chatcmpl-")
        if chunk.usage is not None:
            usage = chunk.usage
        if not chunk.choices:
            continue
        c = chunk.choices[0]
        if c.delta.role:
            roles.append(c.delta.role)
        if c.delta.content:
            deltas.append(c.delta.content)
        if c.finish_reason:
            finish = c.finish_reason
    return deltas, finish, usage, roles


def test_health_models_and_404(fake_server, fake_client):
    r = requests.get(fake_server.base_url + "/health", timeout=10)
    assert r.status_code == 200 and r.json() == {"status": "ok", "backend": "fake"}
    models = fake_client.models.list()
    assert [m.id for m in models.data] == ["fake-model"]
    assert fake_client.models.retrieve("fake-model").id == "fake-model"
    with pytest.raises(openai.NotFoundError) as e:
        fake_client.models.retrieve("gpt-4o")
    assert e.value.code == "model_not_found"
    r = requests.get(fake_server.base_url + "/v1/embeddings", timeout=10)
    assert r.status_code == 404 and r.json()["error"]["type"] == "invalid_request_error"


def test_non_stream_completion_and_usage(fake_client):
    raw = fake_client.chat.completions.with_raw_response.create(model="any-name", messages=HI, temperature=0)
    assert raw.headers["x-swizzle-cache-hit-tokens"] == "0"
    assert raw.headers["x-swizzle-uncached-tokens"] == "10"
    r = raw.parse()
    assert r.object == "chat.completion"
    assert r.model == "fake-model"
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == TEXT
    assert r.choices[0].finish_reason == "stop"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (10, 10, 20)
    assert r.usage.prompt_tokens_details.cached_tokens == 0


def test_stream_deltas_are_whole_characters_and_join_to_the_text(fake_client):
    stream = fake_client.chat.completions.create(model="m", messages=HI, stream=True,
                                                 stream_options={"include_usage": True})
    deltas, finish, usage, roles = collect(stream)
    assert roles == ["assistant"]
    assert deltas == DELTAS
    assert "".join(deltas) == TEXT
    assert finish == "stop"
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (10, 10, 20)
    # Without include_usage there is no usage chunk.
    _, _, usage2, _ = collect(fake_client.chat.completions.create(model="m", messages=HI, stream=True))
    assert usage2 is None


def test_max_tokens_and_max_completion_tokens(fake_client):
    r = fake_client.chat.completions.create(model="m", messages=HI, max_tokens=2)
    assert r.choices[0].message.content == "Hello"
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 2
    r = fake_client.chat.completions.create(model="m", messages=HI, max_tokens=1, max_completion_tokens=4)
    # 4 pieces end inside the emoji: the incomplete bytes become U+FFFD, as Python decodes them.
    assert r.choices[0].message.content == b"Hello \xf0\x9f\x98".decode("utf-8", errors="replace")
    assert r.usage.completion_tokens == 4


@pytest.mark.parametrize("stop,expected", [("世", "Hello 😀 "), (["done", "!"], "Hello 😀 世界"), ("zzz", TEXT)])
def test_stop_sequences_streamed_equals_non_streamed(fake_client, stop, expected):
    r = fake_client.chat.completions.create(model="m", messages=HI, stop=stop)
    assert r.choices[0].message.content == expected
    assert r.choices[0].finish_reason == "stop"
    deltas, finish, _, _ = collect(fake_client.chat.completions.create(model="m", messages=HI, stop=stop, stream=True))
    assert "".join(deltas) == expected
    assert finish == "stop"


@pytest.mark.parametrize("kwargs,param", [
    ({"n": 17}, "n"),
    ({"temperature": 2.5}, "temperature"),
    ({"top_p": 0}, "top_p"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"extra_body": {"top_k": -3}}, "top_k"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    ({"messages": []}, "messages"),
    ({"functions": [{"name": "f", "parameters": {}}]}, "functions"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "maybe"}, "tool_choice"),
])
def test_invalid_requests_raise_bad_request(fake_client, kwargs, param):
    args = {"model": "m", "messages": HI, **kwargs}
    with pytest.raises(openai.BadRequestError) as e:
        fake_client.chat.completions.create(**args)
    assert e.value.status_code == 400
    assert e.value.param == param
    assert e.value.type == "invalid_request_error"
    assert e.value.message


def test_invalid_json_and_infinity(fake_server):
    url = fake_server.base_url + "/v1/chat/completions"
    for body in ["{nope", '{"messages":[{"role":"user","content":"x"}],"temperature":1e999}']:
        r = requests.post(url, data=body, headers={"Content-Type": "application/json"}, timeout=10)
        assert r.status_code == 400
        err = r.json()["error"]
        assert err["type"] == "invalid_request_error" and err["message"]


@pytest.mark.parametrize("stream", [False, True])
def test_overlong_prompt_is_400_before_any_stream_byte(fake_client, stream):
    long = [{"role": "user", "content": "x" * 100}]  # 5 + 100 + 1 + 2 = 108 tokens > 64
    with pytest.raises(openai.BadRequestError) as e:
        fake_client.chat.completions.create(model="m", messages=long, stream=stream)
    assert e.value.code == "context_length_exceeded"
    assert "108 tokens" in e.value.message and "64 tokens" in e.value.message


def test_disconnect_mid_stream_cancels_and_server_keeps_serving(fake_server, fake_client):
    stream = fake_client.chat.completions.create(model="m", messages=[{"role": "user", "content": "forever"}],
                                                 stream=True)
    got = 0
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            got += 1
            if got == 5:
                break
    stream.close()
    assert fake_server.wait_for_log("(client disconnected)", timeout=20), fake_server.log()
    r = fake_client.chat.completions.create(model="m", messages=HI)
    assert r.choices[0].message.content == TEXT
    assert fake_server.alive()


def test_concurrent_clients(fake_client):
    results, errors = [], []

    def one(i):
        try:
            if i % 2:
                results.append(fake_client.chat.completions.create(model="m", messages=HI).choices[0].message.content)
            else:
                d, _, _, _ = collect(fake_client.chat.completions.create(model="m", messages=HI, stream=True))
                results.append("".join(d))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert results == [TEXT] * 6


def test_sigterm_during_a_stream_exits_cleanly():
    """A running generation must not hold shutdown past its grace period: SIGTERM cuts it
    then, and the client sees an error, not a normal end (test_shutdown.py has the rest)."""
    import os
    import signal
    import time
    from pathlib import Path

    from conftest import ROOT, ServerProcess, openai_client

    binary = Path(os.environ.get("SWZ_FAKE_SERVE", ROOT / "build/test/unit/server/swz_fake_serve"))
    if not binary.exists():
        pytest.skip("swz_fake_serve not built")
    s = ServerProcess([str(binary), "0", "1000000", "1"])  # shutdown grace 1 s
    client = openai_client(s.base_url)
    stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "forever"}], stream=True)
    it = iter(stream)
    next(it)
    next(it)
    t0 = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    with pytest.raises(openai.APIError, match="shutting down"):
        for _ in it:
            pass
    assert s.proc.wait(timeout=10) == 0, s.log()
    assert time.monotonic() - t0 < 5
    s.stop()
    assert "SIGTERM received, shutting down" in s.log()
