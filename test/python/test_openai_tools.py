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
