"""OpenAI function calling (`tools`, `tool_choice`, `tool_calls`) through the official
`openai` SDK: exact wire checks against the scripted fake engine, and a tool round trip
through `client.chat.completions.stream()` against Qwen2.5-Coder-0.5B (its template's
native <tool_call> format). See conftest.py for the environment.
"""
from __future__ import annotations

import json

import openai
import pytest

from conftest import openai_client

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def user(text):
    return [{"role": "user", "content": text}]


def test_fake_tool_call_non_stream(fake_client):
    r = fake_client.chat.completions.create(model="m", messages=user("weather?"), tools=[WEATHER])
    c = r.choices[0]
    assert c.finish_reason == "tool_calls"
    assert c.message.content == "Let me check."
    assert len(c.message.tool_calls) == 1
    tc = c.message.tool_calls[0]
    assert tc.type == "function" and tc.id.startswith("call_") and tc.function.name == "get_weather"
    assert json.loads(tc.function.arguments) == {"city": "Paris"}


def test_fake_tool_call_stream_deltas(fake_client):
    chunks = list(fake_client.chat.completions.create(model="m", messages=user("weather?"), tools=[WEATHER],
                                                      stream=True))
    calls = [tc for ch in chunks for tc in (ch.choices[0].delta.tool_calls or [])]
    assert calls and all(isinstance(tc.index, int) for tc in calls)
    first = calls[0]
    assert first.index == 0 and first.id and first.type == "function" and first.function.name == "get_weather"
    assert json.loads("".join(tc.function.arguments or "" for tc in calls)) == {"city": "Paris"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks)
    assert text == "Let me check."


def test_fake_stream_helper_tool_call(fake_client):
    with fake_client.chat.completions.stream(model="m", messages=user("weather?"), tools=[WEATHER]) as s:
        final = s.get_final_completion()
    tc = final.choices[0].message.tool_calls[0]
    assert tc.function.name == "get_weather" and json.loads(tc.function.arguments) == {"city": "Paris"}


def test_fake_required_tool_choice(fake_client):
    r = fake_client.chat.completions.create(model="m", messages=user("hi"), tools=[WEATHER], tool_choice="required")
    c = r.choices[0]
    assert c.finish_reason == "tool_calls" and c.message.content is None
    assert json.loads(c.message.tool_calls[0].function.arguments) == {"city": "Paris"}


def test_fake_tool_messages_are_accepted(fake_client):
    history = user("w") + [  # short: the fake server's context is 64 tokens (one per byte)
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
    ]
    r = fake_client.chat.completions.create(model="m", messages=history)
    assert r.choices[0].finish_reason == "stop" and r.choices[0].message.content


def test_real_tool_round_trip_through_stream_helper(qwen_server):
    client = openai_client(qwen_server.base_url)
    history = [{"role": "system", "content": "You are a helpful assistant."}] + user("What's the weather in Paris?")
    with client.chat.completions.stream(model="qwen", messages=history, tools=[WEATHER], temperature=0,
                                        max_tokens=64,
                                        tool_choice={"type": "function", "function": {"name": "get_weather"}}) as s:
        events = list(s)
        final = s.get_final_completion()
    assert any(e.type == "tool_calls.function.arguments.done" for e in events)
    msg = final.choices[0].message
    assert final.choices[0].finish_reason == "tool_calls"
    call = msg.tool_calls[0]
    assert call.function.name == "get_weather"
    args = json.loads(call.function.arguments)
    assert isinstance(args, dict)
    history += [{"role": "assistant", "content": msg.content, "tool_calls": [
                    {"id": call.id, "type": "function",
                     "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
                {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 C."}]
    with client.chat.completions.stream(model="qwen", messages=history, tools=[WEATHER], temperature=0,
                                        max_tokens=48) as s:
        second = s.get_final_completion()
    assert second.choices[0].finish_reason in ("stop", "length", "tool_calls")
    # The non-streamed answer to the same history is the same (greedy).
    again = client.chat.completions.create(model="qwen", messages=history, tools=[WEATHER], temperature=0,
                                           max_tokens=48)
    assert (again.choices[0].message.content or "") == (second.choices[0].message.content or "")
    assert again.choices[0].finish_reason == second.choices[0].finish_reason


TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Get the current local time in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}

# Issue 14, item 8: with a call forced, Qwen2.5-Coder-0.5B writes its parallel calls inside
# the one <tool_call> tag the prompt opened. Greedy, it writes two calls of one function as
# one object with a repeated name ({"city": "Paris", "city": "Tokyo"}) and calls of two
# functions as objects back to back; each must come out as its own call.
FORCED_PARALLEL = [
    ("What is the weather in Paris and in Tokyo?", [WEATHER],
     [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Tokyo"})]),
    ("Tell me the weather in Paris and the time in Tokyo.", [WEATHER, TIME],
     [("get_weather", {"city": "Paris"}), ("get_time", {"city": "Tokyo"})]),
]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("question,tools,expected", FORCED_PARALLEL, ids=["one-function", "two-functions"])
def test_real_forced_parallel_calls_in_one_tag_are_separate_calls(qwen_server, question, tools, expected, stream):
    client = openai_client(qwen_server.base_url)
    kw = dict(model="qwen", messages=user(question), tools=tools, tool_choice="required", temperature=0, max_tokens=96)
    if stream:
        chunks = list(client.chat.completions.create(stream=True, **kw))
        deltas = [tc for ch in chunks if ch.choices for tc in (ch.choices[0].delta.tool_calls or [])]
        calls = [(d.function.name, json.loads(d.function.arguments)) for d in deltas]
        assert [d.index for d in deltas] == list(range(len(expected)))
        assert chunks[-1].choices[0].finish_reason == "tool_calls"
        assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == ""
    else:
        r = client.chat.completions.create(**kw)
        assert r.choices[0].finish_reason == "tool_calls", r.choices[0]
        assert r.choices[0].message.content is None
        calls = [(tc.function.name, json.loads(tc.function.arguments)) for tc in r.choices[0].message.tool_calls]
        assert len({tc.id for tc in r.choices[0].message.tool_calls}) == len(calls)
    assert calls == expected
    # parallel_tool_calls false keeps the first call only.
    if not stream:
        one = client.chat.completions.create(parallel_tool_calls=False, **kw)
        assert one.choices[0].finish_reason == "tool_calls"
        assert [(tc.function.name, json.loads(tc.function.arguments)) for tc in one.choices[0].message.tool_calls] == expected[:1]
