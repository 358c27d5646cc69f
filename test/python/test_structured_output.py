"""Grammar-constrained decoding (issue 17 items 1-2) through the real SDKs against a real
`swizzle-rt serve` (docs/structured-output.md).

The default model (SmolLM2-135M) is weak; the constraint makes its output valid anyway, so
every constrained output is parsed and checked with PyPI `jsonschema` (and SARIF outputs
against the official SARIF 2.1.0 schema, sarif_schema.py; diffs with `git apply --check`). Qwen2.5-Coder-0.5B
(`qwen_server`) covers forced tool calls in its native template.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from enum import Enum
from pathlib import Path
from typing import Optional

import anthropic
import jsonschema
import openai
import pytest
import requests
from pydantic import BaseModel, Field

from conftest import _missing

GREEDY_A = {"temperature": 0}  # anthropic 2.x: sampling travels as extra body fields


def oai(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0, timeout=300)


def ant(base_url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=base_url, api_key="unused", max_retries=0, timeout=300)


class Color(str, Enum):
    red = "red"
    green = "green"
    blue = "blue"


class Person(BaseModel):
    name: str
    age: int
    city: str


class Pet(BaseModel):
    name: str
    species: str
    favorite_color: Color


class Household(BaseModel):
    # Bounded lists (maxItems): SmolLM2-135M otherwise keeps adding members until max_tokens.
    family_name: str
    members: list[Person] = Field(max_length=3)
    pets: list[Pet] = Field(max_length=2)
    has_garden: bool
    rating: Optional[float]


WEATHER = {
    "name": "get_weather",
    "description": "Get the current weather for a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer"}},
        "required": ["city", "unit", "days"],
        "additionalProperties": False,
    },
}
ADD = {
    "name": "add",
    "description": "Add two integers.",
    "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                     "required": ["a", "b"], "additionalProperties": False},
}


def oai_tool(t: dict) -> dict:
    return {"type": "function", "function": {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]}}


# --- OpenAI: response_format -------------------------------------------------------------

def test_parse_pydantic_model(server):
    c = oai(server.base_url)
    r = c.beta.chat.completions.parse(
        model="m", messages=[{"role": "user", "content": "Alice is 30 and lives in Paris. Extract the person."}],
        response_format=Person, temperature=0, max_tokens=200)
    ch = r.choices[0]
    assert ch.finish_reason == "stop"
    jsonschema.validate(json.loads(ch.message.content), Person.model_json_schema())
    assert isinstance(ch.message.parsed, Person)
    assert ch.message.parsed.age >= 0 or ch.message.parsed.age < 0  # an int, parsed by pydantic


@pytest.mark.parametrize("temperature", [0, 0.9])
def test_parse_nested_model(server, temperature):
    c = oai(server.base_url)
    r = c.beta.chat.completions.parse(
        model="m",
        messages=[{"role": "user", "content": "Describe the Smith household: two people, one cat, a garden."}],
        response_format=Household, temperature=temperature, seed=7, max_tokens=600)
    ch = r.choices[0]
    assert ch.finish_reason == "stop", ch.message.content
    doc = json.loads(ch.message.content)
    jsonschema.validate(doc, Household.model_json_schema())
    assert list(doc) == ["family_name", "members", "pets", "has_garden", "rating"]  # the schema's order
    assert isinstance(ch.message.parsed, Household)


def test_json_object_chat_and_stream(server):
    c = oai(server.base_url)
    msgs = [{"role": "user", "content": "Return a JSON object with the name and age of Alice, who is 30."}]
    r = c.chat.completions.create(model="m", messages=msgs, response_format={"type": "json_object"}, temperature=0,
                                  max_tokens=400)
    assert r.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(r.choices[0].message.content), dict)
    text = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
        model="m", messages=msgs, response_format={"type": "json_object"}, temperature=0, max_tokens=400, stream=True)
        if ch.choices)
    assert text == r.choices[0].message.content


def test_json_schema_on_completions(server):
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}, "unit": {"enum": ["apples", "pears"]},
                                                "notes": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
              "required": ["answer", "unit", "notes"], "additionalProperties": False}
    c = oai(server.base_url)
    r = c.completions.create(model="m", prompt="Q: Tom has 3 apples and buys 4 more. How many apples? A (JSON):",
                             max_tokens=200, temperature=0,
                             extra_body={"response_format": {"type": "json_schema",
                                                             "json_schema": {"name": "a", "schema": schema, "strict": True}}})
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].text), schema)


def test_recursive_ref_schema(server):
    schema = {"$ref": "#/$defs/node", "$defs": {"node": {
        "type": "object", "properties": {"label": {"type": "string", "maxLength": 12},
                                          "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
        "required": ["label", "children"], "additionalProperties": False}}}
    c = oai(server.base_url)
    r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "A small tree of animals, as JSON."}],
                                  temperature=0, max_tokens=500,
                                  response_format={"type": "json_schema", "json_schema": {"name": "t", "schema": schema}})
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].message.content), schema)


def test_max_tokens_cuts_with_length(server):
    c = oai(server.base_url)
    r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "Describe a household."}],
                                  temperature=0, max_tokens=5,
                                  response_format={"type": "json_schema",
                                                   "json_schema": {"name": "h", "schema": Household.model_json_schema()}})
    ch = r.choices[0]
    assert ch.finish_reason == "length"
    assert ch.message.content.startswith("{")  # a prefix of a valid document, not a whole one
    with pytest.raises(json.JSONDecodeError):
        json.loads(ch.message.content)


def test_speculative_equals_plain(server):
    # A prompt the prompt-lookup drafter copies from: drafts the grammar forbids are rejected
    # and greedy output is the same with and without speculative decoding.
    doc = {"name": "Bob Stone", "age": 41, "city": "Lyon"}
    msgs = [{"role": "user", "content": "Repeat this JSON exactly: " + json.dumps(doc) + " " + json.dumps(doc)}]
    out = []
    for spec in (False, True):
        r = requests.post(server.base_url + "/v1/chat/completions", timeout=300, json={
            "model": "m", "messages": msgs, "temperature": 0, "max_tokens": 120, "speculative": spec,
            "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": Person.model_json_schema()}}})
        assert r.status_code == 200, r.text
        out.append(r.json())
    assert out[0]["choices"][0]["message"]["content"] == out[1]["choices"][0]["message"]["content"]
    jsonschema.validate(json.loads(out[1]["choices"][0]["message"]["content"]), Person.model_json_schema())
    assert out[1]["usage"]["completion_tokens_details"]["accepted_prediction_tokens"] > 0


def test_choices_and_concurrent_requests_share_a_grammar(server):
    # n > 1 choices and concurrent requests of one schema run together in the scheduler's
    # batch, their matchers sharing one compiled grammar's tables: every answer is valid.
    from concurrent.futures import ThreadPoolExecutor
    c = oai(server.base_url)
    # Bounded strings: sampled at temperature 0.8, SmolLM2 may otherwise write one name until max_tokens.
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 24}, "age": {"type": "integer"},
                                                "city": {"type": "string", "maxLength": 24}},
              "required": ["name", "age", "city"], "additionalProperties": False}
    rf = {"type": "json_schema", "json_schema": {"name": "p", "schema": schema}}

    def ask(i):
        return c.chat.completions.create(model="m", messages=[{"role": "user", "content": f"Invent person number {i}."}],
                                         temperature=0.8, seed=i, n=2, max_tokens=200, response_format=rf)
    with ThreadPoolExecutor(4) as pool:
        rs = list(pool.map(ask, range(4)))
    for r in rs:
        assert len(r.choices) == 2
        for ch in r.choices:
            assert ch.finish_reason == "stop", ch.message.content
            jsonschema.validate(json.loads(ch.message.content), schema)


# --- item 2: schemas that cannot be compiled ----------------------------------------------

BAD_SCHEMAS = [
    ({"type": "object", "properties": {"z": {"type": "string", "pattern": "^[0-9]+$"}}}, "pattern"),
    ({"type": "object", "properties": {"n": {"type": "number", "minimum": 3}}}, "minimum"),
    ({"type": "object", "properties": {"x": {"type": "strung"}}}, "type"),
    ({"$ref": "#/$defs/nowhere"}, "$ref"),
    ({"$ref": "#/$defs/a", "$defs": {"a": {"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}}, "required": ["x"]}}},
     "$ref"),
    ({"allOf": [{"type": "object"}, {"type": "object"}]}, "allOf"),
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "uniqueItems"),
]


@pytest.mark.parametrize("schema,keyword", BAD_SCHEMAS)
def test_openai_bad_schema_is_400_naming_keyword(server, schema, keyword):
    c = oai(server.base_url)
    rf = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": True}}
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], response_format=rf)
    err = e.value.body
    assert err["type"] == "invalid_request_error" and err["param"] == "response_format.json_schema.schema"
    assert f"'{keyword}'" in err["message"]
    with pytest.raises(openai.BadRequestError) as e:
        c.completions.create(model="m", prompt="hi", extra_body={"response_format": rf})
    assert f"'{keyword}'" in e.value.body["message"]
    # A forced tool's parameters: the same check.
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                  tools=[{"type": "function", "function": {"name": "f", "parameters": schema}}],
                                  tool_choice="required")
    assert e.value.body["param"] == "tools[0].function.parameters" and f"'{keyword}'" in e.value.body["message"]


@pytest.mark.parametrize("schema,keyword", BAD_SCHEMAS[:4])
def test_anthropic_bad_schema_is_400_naming_keyword(server, schema, keyword):
    a = ant(server.base_url)
    with pytest.raises(anthropic.BadRequestError) as e:
        a.messages.create(model="m", max_tokens=50, messages=[{"role": "user", "content": "hi"}],
                          tools=[{"name": "f", "description": "f", "input_schema": schema}],
                          tool_choice={"type": "tool", "name": "f"})
    assert e.value.body["type"] == "error" and e.value.body["error"]["type"] == "invalid_request_error"
    assert f"'{keyword}'" in e.value.body["error"]["message"]
    r = requests.post(server.base_url + "/v1/messages", timeout=60, json={
        "model": "m", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}],
        "output_config": {"format": {"type": "json_schema", "schema": schema}}})
    assert r.status_code == 400 and r.json()["type"] == "error"
    assert f"'{keyword}'" in r.json()["error"]["message"]


def test_unknown_format_is_400(server):
    r = requests.post(server.base_url + "/v1/chat/completions", timeout=60, json={
        "model": "m", "messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "yaml"}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "response_format.type"


# --- forced tool calls --------------------------------------------------------------------

@pytest.mark.parametrize("choice", [{"type": "tool", "name": "get_weather"}, {"type": "any"},
                                    {"type": "any", "disable_parallel_tool_use": True}])
def test_anthropic_forced_tool_use(server, choice):
    a = ant(server.base_url)
    # SmolLM2 repeats its call in every form the grammar allows (at most 4 objects of 4
    # member lists): room for all of them.
    m = a.messages.create(model="m", max_tokens=1000, tools=[WEATHER, ADD], tool_choice=choice,
                          messages=[{"role": "user", "content": "What's the weather in Oslo for the next 3 days?"}],
                          extra_body=GREEDY_A)
    assert m.stop_reason == "tool_use"
    uses = [b for b in m.content if b.type == "tool_use"]
    assert len(uses) >= 1  # the grammar allows parallel calls (Qwen2.5's forms)
    if choice.get("disable_parallel_tool_use"):
        assert len(uses) == 1
    for use in uses:
        tool = {"get_weather": WEATHER, "add": ADD}[use.name]
        if choice["type"] == "tool":
            assert use.name == "get_weather"
        jsonschema.validate(use.input, tool["input_schema"])


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "add"}}])
def test_openai_forced_tool_call(server, choice):
    c = oai(server.base_url)
    r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "What is 2 plus 40?"}],
                                  tools=[oai_tool(WEATHER), oai_tool(ADD)], tool_choice=choice, temperature=0, max_tokens=1000)
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls"
    assert len(ch.message.tool_calls) >= 1
    for tc in ch.message.tool_calls:
        tool = {"get_weather": WEATHER, "add": ADD}[tc.function.name]
        if isinstance(choice, dict):
            assert tc.function.name == "add"
        jsonschema.validate(json.loads(tc.function.arguments), tool["input_schema"])
    one = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "What is 2 plus 40?"}],
                                    tools=[oai_tool(WEATHER), oai_tool(ADD)], tool_choice=choice, temperature=0,
                                    max_tokens=200, parallel_tool_calls=False)
    assert len(one.choices[0].message.tool_calls) == 1


def test_qwen_forced_tool_use_and_parse(qwen_server):
    a = ant(qwen_server.base_url)
    m = a.messages.create(model="m", max_tokens=200, tools=[WEATHER, ADD], tool_choice={"type": "any"},
                          messages=[{"role": "user", "content": "What's the weather in Oslo for the next 3 days, in celsius?"}],
                          extra_body=GREEDY_A)
    assert m.stop_reason == "tool_use"
    use = [b for b in m.content if b.type == "tool_use"][0]
    assert use.name == "get_weather"  # the first call (parallel ones may follow)
    jsonschema.validate(use.input, WEATHER["input_schema"])
    assert use.input["city"] == "Oslo" and use.input["days"] == 3
    c = oai(qwen_server.base_url)
    r = c.beta.chat.completions.parse(
        model="m", messages=[{"role": "user", "content": "Alice is 30 and lives in Paris. Extract the person."}],
        response_format=Person, temperature=0, max_tokens=200)
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].message.parsed == Person(name="Alice", age=30, city="Paris")


# --- built-in formats ---------------------------------------------------------------------

VULN = "import os\n\ndef run(cmd):\n    os.system('sh -c ' + cmd)\n\nrun(input())\n"


def test_sarif_openai_and_anthropic(server, sarif_validator):
    prompt = ("Report the security problems of this Python file app.py as SARIF 2.1.0:\n\n" + VULN)
    c = oai(server.base_url)
    r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": prompt}], temperature=0,
                                  max_tokens=700, response_format={"type": "sarif-2.1.0"})
    assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
    log = json.loads(r.choices[0].message.content)
    sarif_validator.validate(log)  # the official OASIS schema (sarif_schema.py)
    assert log["version"] == "2.1.0" and len(log["runs"]) == 1
    resp = requests.post(server.base_url + "/v1/messages", timeout=300, json={
        "model": "m", "max_tokens": 700, "temperature": 0, "messages": [{"role": "user", "content": prompt}],
        "output_config": {"format": {"type": "sarif-2.1.0"}}})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["stop_reason"] == "end_turn"
    sarif_validator.validate(json.loads(body["content"][0]["text"]))


def _hunk_counts_agree(diff: str) -> bool:
    lines = diff.split("\n")
    assert lines[0].startswith("--- ") and lines[1].startswith("+++ ")
    i = 2
    while i < len(lines) and lines[i]:
        m = re.match(r"@@ -(\d+),(\d+) \+(\d+),(\d+) @@", lines[i])
        assert m, lines[i]
        old, new = int(m.group(2)), int(m.group(4))
        i += 1
        while i < len(lines) and lines[i] and not lines[i].startswith("@@"):
            old -= lines[i][0] in " -"
            new -= lines[i][0] in " +"
            i += 1
        if old or new:
            return False
    return True


def test_unified_diff_generic(server):
    c = oai(server.base_url)
    r = c.chat.completions.create(model="m", temperature=0, max_tokens=300, messages=[
        {"role": "user", "content": "Write a unified diff that renames function run to execute in app.py:\n\n" + VULN}],
        response_format={"type": "unified-diff"})
    text = r.choices[0].message.content
    assert r.choices[0].finish_reason in ("stop", "length")
    if r.choices[0].finish_reason == "stop":
        assert _hunk_counts_agree(text), text
    else:
        assert text.startswith("--- ")


@pytest.fixture()
def git_repo(tmp_path):
    git = shutil.which("git")
    if not git:
        _missing("git not installed")
    subprocess.run([git, "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "app.py").write_text(VULN)
    return tmp_path


def test_unified_diff_applies_with_git(server, git_repo):
    original = {"path": "app.py", "content": VULN}
    ask = "Fix the command injection in app.py with a unified diff (use subprocess.run with a list):\n\n" + VULN
    c = oai(server.base_url)
    r = c.chat.completions.create(model="m", temperature=0, max_tokens=1500, messages=[{"role": "user", "content": ask}],
                                  response_format={"type": "unified-diff", "original": original})
    resp = requests.post(server.base_url + "/v1/messages", timeout=300, json={
        "model": "m", "max_tokens": 1500, "temperature": 0, "messages": [{"role": "user", "content": ask}],
        "output_config": {"format": {"type": "unified-diff", "original": original}}})
    assert resp.status_code == 200, resp.text
    diffs = [r.choices[0].message.content, resp.json()["content"][0]["text"]]
    assert r.choices[0].finish_reason == "stop" and resp.json()["stop_reason"] == "end_turn"
    for d in diffs:
        (git_repo / "fix.patch").write_text(d)
        chk = subprocess.run(["git", "apply", "--check", "fix.patch"], cwd=git_repo, capture_output=True, text=True)
        assert chk.returncode == 0, f"{chk.stderr}\n{d}"
        assert d.startswith("--- a/app.py\n+++ b/app.py\n@@ -")
