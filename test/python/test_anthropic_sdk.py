"""POST /v1/messages driven by the official `anthropic` SDK.

Two servers: `swz_fake_serve` (the real HTTP layer over the scripted FakeEngine, so
text, tool calls and usage are exact) and `swizzle-rt serve` with a real compiled model
(greedy decoding: the stream must equal the non-streamed message). See conftest.py for
the environment (SWZ_RT, SWZ_PACKAGE, SWZ_REQUIRE...).
"""
from __future__ import annotations

import json

import anthropic
import pytest
import requests

from conftest import start_rt

# anthropic 2.x dropped temperature/top_p/top_k from messages.create(); the API still
# takes them, so they travel as extra body fields.
GREEDY = {"temperature": 0}
FAKE_TEXT = "Hello 😀 世界! 🇫🇷 done."
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Get the current weather for a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def anthropic_client(base_url: str, api_key: str = "unused", **kw) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=base_url, api_key=api_key, max_retries=0, timeout=120, **kw)


@pytest.fixture(scope="module")
def fake_anthropic(fake_server):
    return anthropic_client(fake_server.base_url)


@pytest.fixture(scope="module")
def real_anthropic(server):
    return anthropic_client(server.base_url)


def user(text):
    return [{"role": "user", "content": text}]


def event_types(events):
    return [e.type for e in events]


# ---------------------------------------------------------------- fake engine (exact)

def test_fake_message_text_usage_and_headers(fake_anthropic):
    raw = fake_anthropic.messages.with_raw_response.create(model="claude-x", max_tokens=100, messages=user("hi"),
                                                          metadata={"user_id": "u1"})
    m = raw.parse()
    assert m.type == "message" and m.role == "assistant" and m.id.startswith("msg_")
    assert m.model == "fake-model"
    assert [b.type for b in m.content] == ["text"]
    assert m.content[0].text == FAKE_TEXT
    assert m.stop_reason == "end_turn" and m.stop_sequence is None
    u = m.usage
    prompt = u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
    assert prompt == len("user:hi\n") + 2  # the fake engine: one token per byte + 2
    assert u.cache_read_input_tokens == 0 and u.output_tokens == 10
    assert int(raw.headers["x-swizzle-cache-hit-tokens"]) == u.cache_read_input_tokens
    assert int(raw.headers["x-swizzle-uncached-tokens"]) == prompt - u.cache_read_input_tokens


def test_fake_stream_event_sequence(fake_anthropic):
    events = list(fake_anthropic.messages.create(model="m", max_tokens=100, messages=user("hi"), stream=True))
    types = event_types(events)
    assert types[0] == "message_start" and types[1] == "content_block_start"
    assert types[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(types[2:-3]) == {"content_block_delta"}
    assert events[0].message.usage.cache_creation_input_tokens == len("user:hi\n") + 2
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta")
    assert text == FAKE_TEXT
    assert events[-2].delta.stop_reason == "end_turn" and events[-2].usage.output_tokens == 10


def test_fake_stream_helper_and_max_tokens(fake_anthropic):
    with fake_anthropic.messages.stream(model="m", max_tokens=3, messages=user("hi")) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text == final.content[0].text == "Hello \N{GRINNING FACE}"[:6] + "\ufffd"  # cut inside the emoji
    assert final.stop_reason == "max_tokens" and final.usage.output_tokens == 3


@pytest.mark.parametrize("stream", [False, True])
def test_fake_stop_sequence(fake_anthropic, stream):
    kw = dict(model="m", max_tokens=100, messages=user("hi"), stop_sequences=["zz", "世界"])
    if stream:
        with fake_anthropic.messages.stream(**kw) as s:
            m = s.get_final_message()
    else:
        m = fake_anthropic.messages.create(**kw)
    assert m.content[0].text == "Hello 😀 "
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == "世界"


def test_fake_tool_use_non_stream(fake_anthropic):
    m = fake_anthropic.messages.create(model="m", max_tokens=100, tools=[WEATHER_TOOL],
                                       messages=user("weather in Paris?"))
    assert [b.type for b in m.content] == ["text", "tool_use"]
    assert m.content[0].text == "Let me check."
    tu = m.content[1]
    assert tu.name == "get_weather" and tu.input == {"city": "Paris"} and tu.id.startswith("toolu_")
    assert m.stop_reason == "tool_use"


def test_fake_tool_use_stream_events(fake_anthropic):
    events = list(fake_anthropic.messages.create(model="m", max_tokens=100, tools=[WEATHER_TOOL],
                                                 messages=user("weather?"), stream=True))
    starts = [e for e in events if e.type == "content_block_start"]
    assert [(e.index, e.content_block.type) for e in starts] == [(0, "text"), (1, "tool_use")]
    assert starts[1].content_block.name == "get_weather"
    partial = "".join(e.delta.partial_json for e in events
                      if e.type == "content_block_delta" and e.delta.type == "input_json_delta")
    assert json.loads(partial) == {"city": "Paris"}
    stops = [e.index for e in events if e.type == "content_block_stop"]
    assert stops == [0, 1]
    assert events[-2].type == "message_delta" and events[-2].delta.stop_reason == "tool_use"
    with fake_anthropic.messages.stream(model="m", max_tokens=100, tools=[WEATHER_TOOL], messages=user("w")) as s:
        final = s.get_final_message()
    assert final.content[1].input == {"city": "Paris"}


def test_fake_forced_tool_choice_has_no_text_block(fake_anthropic):
    for stream in (False, True):
        kw = dict(model="m", max_tokens=100, tools=[WEATHER_TOOL], tool_choice={"type": "any"},
                  messages=user("hi"))
        if stream:
            with fake_anthropic.messages.stream(**kw) as s:
                m = s.get_final_message()
        else:
            m = fake_anthropic.messages.create(**kw)
        assert [b.type for b in m.content] == ["tool_use"]
        assert m.content[0].input == {"city": "Paris"} and m.stop_reason == "tool_use"


def test_fake_count_tokens(fake_anthropic):
    r = fake_anthropic.messages.count_tokens(model="m", messages=user("hi"), system="sys")
    assert r.input_tokens == len("system:sys\nuser:hi\n") + 2


@pytest.mark.parametrize("kwargs,field", [
    (dict(max_tokens=0), "max_tokens"),
    (dict(extra_body={"temperature": 1.5}), "temperature"),
    (dict(extra_body={"top_p": 0.0}), "top_p"),
    (dict(extra_body={"top_k": -1}), "top_k"),
    (dict(thinking={"type": "enabled", "budget_tokens": 1024}), "thinking"),
    (dict(messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}]),
     "messages.0.content.0.type"),
    (dict(messages=[{"role": "user", "content": [
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}]}]),
     "messages.0.content.0.type"),
    (dict(tools=[{"type": "web_search_20250305", "name": "web_search"}]), "tools.0.type"),
    # Structured outputs are supported (test_structured_output.py); a schema keyword the engine
    # cannot compile is refused by name.
    (dict(output_config={"format": {"type": "json_schema", "schema": {"type": "string", "pattern": "a+"}}}),
     "output_config.format.schema"),
])
def test_fake_invalid_requests_are_invalid_request_errors(fake_anthropic, kwargs, field):
    kw = dict(model="m", max_tokens=10, messages=user("hi"))
    kw.update(kwargs)
    with pytest.raises(anthropic.BadRequestError) as ei:
        fake_anthropic.messages.create(**kw)
    assert ei.value.status_code == 400
    assert ei.value.body["type"] == "error"
    assert ei.value.body["error"]["type"] == "invalid_request_error"
    assert ei.value.body["error"]["message"].startswith(field + ":")


def test_fake_raw_errors_and_server_stays_up(fake_server):
    url = fake_server.base_url + "/v1/messages"
    cases = [
        ('{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"temperature":NaN}', 400),
        ('{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"temperature":1e999}', 400),
        ('{"model":"m","messages":[{"role":"user","content":"x"}]}', 400),
        ('not json', 400),
    ]
    for body, status in cases:
        r = requests.post(url, data=body, headers={"content-type": "application/json"}, timeout=10)
        assert r.status_code == status
        assert r.json()["type"] == "error" and r.json()["error"]["type"] == "invalid_request_error"
    r = requests.post(url, json={"model": "m", "max_tokens": 5, "messages": user("x")},
                      headers={"anthropic-version": "1999-01-01"}, timeout=10)
    assert r.status_code == 400 and "anthropic-version" in r.json()["error"]["message"]
    r = requests.post(fake_server.base_url + "/v1/messages/batches", json={}, timeout=10)
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
    assert requests.get(fake_server.base_url + "/health", timeout=10).status_code == 200


def test_fake_sdk_not_found(fake_server):
    c = anthropic_client(fake_server.base_url + "/nope")
    with pytest.raises(anthropic.NotFoundError):
        c.messages.create(model="m", max_tokens=5, messages=user("x"))


# ---------------------------------------------------------------- real model

def test_real_message_and_stream_agree_greedy(real_anthropic):
    # A system prompt of more than one 64-token block: the prefix cache shares whole blocks.
    kw = dict(model="any", max_tokens=32, extra_body=GREEDY, system="You are a terse assistant. " * 16,
              messages=user("Name three colours."))
    m = real_anthropic.messages.create(**kw)
    assert m.content and m.content[0].type == "text" and m.content[0].text
    with real_anthropic.messages.stream(**kw) as s:
        deltas = list(s.text_stream)
        final = s.get_final_message()
    assert "".join(deltas) == m.content[0].text == final.content[0].text
    assert final.stop_reason == m.stop_reason and m.stop_reason in ("end_turn", "max_tokens")
    assert final.usage.output_tokens == m.usage.output_tokens
    u = final.usage
    assert u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens == \
        m.usage.input_tokens + m.usage.cache_creation_input_tokens + m.usage.cache_read_input_tokens
    # The second identical prompt is served from the cache: every whole 64-token block and
    # the start of the partial last one, but never the last prompt token (it is evaluated
    # again for its logits).
    prompt = u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
    assert u.cache_read_input_tokens == prompt - 1


def test_real_stream_headers_carry_admission_counts(server, real_anthropic):
    kw = dict(model="any", max_tokens=4, extra_body=GREEDY, system="You count things carefully. " * 16,
              messages=user("Count to three."))
    real_anthropic.messages.create(**kw)
    with real_anthropic.messages.with_streaming_response.create(stream=True, **kw) as raw:
        hit = int(raw.headers["x-swizzle-cache-hit-tokens"])
        miss = int(raw.headers["x-swizzle-uncached-tokens"])
        body = "".join(raw.iter_text())
    start = json.loads(body.split("data: ", 1)[1].split("\n", 1)[0])
    usage = start["message"]["usage"]
    assert hit > 0 and usage["cache_read_input_tokens"] == hit
    assert usage["input_tokens"] + usage["cache_creation_input_tokens"] == miss


def test_real_billing_header_does_not_defeat_the_prefix_cache(real_anthropic):
    def ask(cch):
        return real_anthropic.messages.create(
            model="any", max_tokens=2, extra_body=GREEDY,
            system=[{"type": "text", "text": f"x-anthropic-billing-header: cc_version=2.1.0; cch={cch};"},
                    {"type": "text", "text": "You are a helpful coding agent. " * 8, "cache_control": {"type": "ephemeral"}}],
            messages=[{"role": "user", "content": [{"type": "text", "text": "Reply with OK.",
                                                   "cache_control": {"type": "ephemeral"}}]}])
    ask("aaaa1")
    m = ask("bbbb2")
    prompt = m.usage.input_tokens + m.usage.cache_creation_input_tokens + m.usage.cache_read_input_tokens
    # Identical prompts once the header block is dropped: a full hit, all but the last token.
    assert m.usage.cache_read_input_tokens == prompt - 1


def test_real_prefill_is_continued(real_anthropic):
    m = real_anthropic.messages.create(model="any", max_tokens=8, extra_body=GREEDY,
                                       messages=[{"role": "user", "content": "Count from 1 to 5."},
                                                 {"role": "assistant", "content": "1, 2,"}])
    assert m.content[0].type == "text"
    n = real_anthropic.messages.count_tokens(model="any", messages=[{"role": "user", "content": "Count from 1 to 5."},
                                                                    {"role": "assistant", "content": "1, 2,"}])
    prompt = m.usage.input_tokens + m.usage.cache_creation_input_tokens + m.usage.cache_read_input_tokens
    assert n.input_tokens == prompt


def test_real_tool_use_then_tool_result_round_trip(real_anthropic):
    history = user("What is the weather in Paris? Use the tool.")
    with real_anthropic.messages.stream(model="any", max_tokens=64, extra_body=GREEDY, tools=[WEATHER_TOOL],
                                        tool_choice={"type": "tool", "name": "get_weather"},
                                        messages=history) as s:
        first = s.get_final_message()
    assert first.stop_reason == "tool_use"
    calls = [b for b in first.content if b.type == "tool_use"]
    assert calls and calls[0].name == "get_weather" and isinstance(calls[0].input, dict)
    history = history + [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": calls[0].id,
                                      "content": [{"type": "text", "text": "Sunny, 21 C."}]}]},
    ]
    second = real_anthropic.messages.create(model="any", max_tokens=32, extra_body=GREEDY, tools=[WEATHER_TOOL],
                                            messages=history)
    assert second.stop_reason in ("end_turn", "max_tokens", "tool_use")
    assert second.content


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_qwen_forced_parallel_calls_in_one_tag_are_separate_tool_uses(qwen_server, stream):
    """Issue 14, item 8: tool_choice {type: any}; greedy Qwen2.5-Coder-0.5B writes both
    cities into one <tool_call> as {"city": "Paris", "city": "Tokyo"}: two tool_use blocks."""
    client = anthropic_client(qwen_server.base_url)
    kw = dict(model="qwen", max_tokens=96, tools=[WEATHER_TOOL], tool_choice={"type": "any"},
              messages=user("What is the weather in Paris and in Tokyo?"), extra_body=GREEDY)
    if stream:
        with client.messages.stream(**kw) as s:
            msg = s.get_final_message()
    else:
        msg = client.messages.create(**kw)
    assert msg.stop_reason == "tool_use", msg
    assert [b.type for b in msg.content] == ["tool_use", "tool_use"], msg.content
    assert [(b.name, b.input) for b in msg.content] == [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Tokyo"})]
    assert msg.content[0].id != msg.content[1].id
    if not stream:
        kw["tool_choice"] = {"type": "any", "disable_parallel_tool_use": True}
        one = client.messages.create(**kw)
        assert [(b.name, b.input) for b in one.content] == [("get_weather", {"city": "Paris"})]


def test_real_context_overflow_is_prompt_too_long(real_anthropic, n_ctx):
    with pytest.raises(anthropic.BadRequestError) as ei:
        real_anthropic.messages.create(model="any", max_tokens=5, messages=user("word " * (n_ctx + 10)))
    assert ei.value.body["error"]["message"].startswith("prompt is too long: ")


def test_real_auth_by_x_api_key_or_bearer(rt_binary, package, n_ctx):
    s = start_rt(rt_binary, package, n_ctx, "--api-key", "sekrit")
    try:
        ok = anthropic_client(s.base_url, api_key="sekrit")  # sends x-api-key
        assert ok.messages.create(model="m", max_tokens=1, messages=user("hi")).usage.output_tokens <= 1
        bearer = anthropic.Anthropic(base_url=s.base_url, auth_token="sekrit", max_retries=0)
        assert bearer.messages.count_tokens(model="m", messages=user("hi")).input_tokens > 0
        with pytest.raises(anthropic.AuthenticationError) as ei:
            anthropic_client(s.base_url, api_key="wrong").messages.create(model="m", max_tokens=1, messages=user("hi"))
        assert ei.value.body["error"]["type"] == "authentication_error"
    finally:
        assert s.stop() == 0
