"""Per-organisation keys with scopes and the security endpoint, with a real
`swizzle-rt serve --key-store` process on the default model (docs/server.md,
"Organisations, scopes and the security endpoint"): `swizzle-rt keys add|revoke|list`,
terms before a security key, secrets never stored, 403 in each API's schema through the
official SDKs, keys added and revoked without a restart, the ledger per organisation.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
import time
from pathlib import Path

import anthropic
import openai
import pytest
import requests

from conftest import openai_client, start_rt

MSGS = [{"role": "user", "content": "Say hello."}]


def keys(rt_binary, store: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(rt_binary), "keys", *args, "--store", str(store)], capture_output=True, text=True,
                          timeout=30)


def add(rt_binary, store: Path, *args: str) -> str:
    r = keys(rt_binary, store, "add", *args)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.fixture(scope="module")
def org_keys(rt_binary, tmp_path_factory):
    store = tmp_path_factory.mktemp("keys") / "keys.json"
    acme_general = add(rt_binary, store, "--org", "acme")
    # A security key before the terms are accepted is refused, and nothing is written.
    r = keys(rt_binary, store, "add", "--org", "acme", "--scope", "security")
    assert r.returncode == 1 and "acceptable-use terms" in r.stderr and r.stdout == ""
    acme_security = add(rt_binary, store, "--org", "acme", "--scope", "security", "--accept-terms", "aup-2026-11",
                        "--accepted-by", "Ada Lovelace")
    globex_both = add(rt_binary, store, "--org", "globex", "--scope", "general", "--scope", "security",
                      "--accept-terms", "aup-2026-11", "--accepted-by", "Grace Hopper")
    return store, {"acme_general": acme_general, "acme_security": acme_security, "globex_both": globex_both}


@pytest.fixture(scope="module")
def kserver(rt_binary, package, n_ctx, org_keys):
    s = start_rt(rt_binary, package, n_ctx, "--key-store", str(org_keys[0]))
    yield s
    assert s.stop() == 0, s.log()


def test_store_holds_digests_terms_and_no_secret(rt_binary, org_keys):
    store, secrets = org_keys
    text = store.read_text()
    assert stat.S_IMODE(os.stat(store).st_mode) == 0o600
    data = json.loads(text)
    assert data["format"] == "swizzle-keys/1"
    assert {k["org"] for k in data["keys"]} == {"acme", "globex"}
    for secret in secrets.values():
        assert secret.startswith("sk-swz-") and len(secret) == 50
        assert secret not in text and secret[7:] not in text
        assert hashlib.sha256(secret.encode()).hexdigest() in text
    terms = data["organisations"]
    assert terms["acme"]["terms"]["version"] == "aup-2026-11"
    assert terms["acme"]["terms"]["accepted_by"] == "Ada Lovelace"
    assert terms["globex"]["terms"]["accepted_by"] == "Grace Hopper"
    listing = keys(rt_binary, store, "list")
    assert listing.returncode == 0
    for k in data["keys"]:
        assert k["id"] in listing.stdout
    assert "terms: organisation 'acme' accepted version 'aup-2026-11' (by Ada Lovelace" in listing.stdout
    assert not any(s in listing.stdout for s in secrets.values())


def test_scopes_through_the_official_sdks(kserver, org_keys):
    _, k = org_keys
    base = kserver.base_url
    # General key: /v1 works, /v1/security is 403 (PermissionDeniedError) with the scope named.
    c = openai_client(base, api_key=k["acme_general"])
    r = c.chat.completions.create(model="m", messages=MSGS, max_tokens=6, temperature=0)
    assert r.usage.completion_tokens > 0 and r.choices[0].message.content
    sec_general = openai.OpenAI(base_url=base + "/v1/security", api_key=k["acme_general"], max_retries=0)
    with pytest.raises(openai.PermissionDeniedError) as e:
        sec_general.chat.completions.create(model="m", messages=MSGS, max_tokens=6)
    assert e.value.status_code == 403
    assert e.value.body["code"] == "missing_scope" and "'security' scope" in e.value.body["message"]

    # Security key: /v1/security (OpenAI) and /security (Anthropic SDK, which adds /v1) work; /v1 is 403.
    sec = openai.OpenAI(base_url=base + "/v1/security", api_key=k["acme_security"], max_retries=0)
    r = sec.chat.completions.create(model="m", messages=MSGS, max_tokens=6, temperature=0)
    assert r.usage.completion_tokens > 0
    r = sec.completions.create(model="m", prompt="def add(a, b):", max_tokens=6, temperature=0)
    assert r.usage.completion_tokens > 0
    a = anthropic.Anthropic(base_url=base + "/security", api_key=k["acme_security"], max_retries=0)
    m = a.messages.create(model="m", max_tokens=6, messages=MSGS)
    assert m.usage.output_tokens > 0 and m.content[0].text
    with pytest.raises(openai.PermissionDeniedError):
        openai_client(base, api_key=k["acme_security"]).chat.completions.create(model="m", messages=MSGS, max_tokens=6)
    with pytest.raises(anthropic.PermissionDeniedError) as ae:
        anthropic.Anthropic(base_url=base, api_key=k["acme_security"], max_retries=0).messages.create(
            model="m", max_tokens=6, messages=MSGS)
    assert ae.value.body["error"]["type"] == "permission_error"
    with pytest.raises(anthropic.PermissionDeniedError):
        anthropic.Anthropic(base_url=base + "/security", api_key=k["acme_general"], max_retries=0).messages.create(
            model="m", max_tokens=6, messages=MSGS)
    # Unknown key: 401.
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=base + "/v1/security", api_key="sk-swz-nope", max_retries=0).chat.completions.create(
            model="m", messages=MSGS, max_tokens=6)


def usage_rows(base: str, key: str) -> list[dict]:
    r = requests.get(base + "/v1/usage", headers={"Authorization": "Bearer " + key}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["data"]


def test_ledger_is_per_organisation(kserver, org_keys):
    _, k = org_keys
    before = {row["key_id"]: row for row in usage_rows(kserver.base_url, k["globex_both"])}
    got = []
    for path in ("/v1/chat/completions", "/v1/security/chat/completions"):
        r = requests.post(kserver.base_url + path, json={"messages": MSGS, "max_tokens": 5, "temperature": 0},
                          headers={"Authorization": "Bearer " + k["globex_both"]}, timeout=300)
        assert r.status_code == 200, r.text
        got.append(r.json()["usage"])
    rows = usage_rows(kserver.base_url, k["globex_both"])
    assert [row["key_id"] for row in rows] == ["org:globex"]  # an organisation sees only its own rows
    row, old = rows[0], before.get("org:globex", {"requests": 0, "output_tokens": 0, "input_tokens": 0,
                                                   "cached_input_tokens": 0})
    assert row["requests"] - old["requests"] == 2
    assert row["output_tokens"] - old["output_tokens"] == sum(u["completion_tokens"] for u in got)
    prompt = sum(u["prompt_tokens"] for u in got)
    assert (row["input_tokens"] + row["cached_input_tokens"]) - (old["input_tokens"] + old["cached_input_tokens"]) == prompt
    acme = usage_rows(kserver.base_url, k["acme_general"])
    assert [row["key_id"] for row in acme] == ["org:acme"]


def test_keys_added_and_revoked_without_a_restart(rt_binary, kserver, org_keys):
    store, k = org_keys
    fresh = add(rt_binary, store, "--org", "initech", "--scope", "security", "--accept-terms", "aup-2026-11",
                "--accepted-by", "Bob")
    url = kserver.base_url + "/v1/security/chat/completions"
    body = {"messages": MSGS, "max_tokens": 2}

    def status(key: str) -> int:
        deadline = time.monotonic() + 5  # the server re-checks the file at most once a second
        while True:
            s = requests.post(url, json=body, headers={"Authorization": "Bearer " + key}, timeout=300).status_code
            if s in (200, 403) or time.monotonic() > deadline:
                return s
            time.sleep(0.2)

    assert status(fresh) == 200
    kid = json.loads(store.read_text())["keys"][-1]["id"]
    r = keys(rt_binary, store, "revoke", kid)
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        s = requests.post(url, json=body, headers={"Authorization": "Bearer " + fresh}, timeout=300).status_code
        if s == 401:
            break
        time.sleep(0.2)
    assert s == 401
    assert keys(rt_binary, store, "revoke", kid).returncode == 1  # already revoked
    assert "reloaded" in kserver.log()


# --- The security endpoint's default output: SARIF 2.1.0 (docs/server.md) -----------------

GREEDY = {"temperature": 0}  # anthropic 2.x: sampling travels as extra body fields
VULN = "import os\n\ndef run(cmd):\n    os.system('sh -c ' + cmd)\n\nrun(input())\n"
SCAN = [{"role": "user", "content": "Report the security problems of this Python file app.py as SARIF 2.1.0:\n\n" + VULN}]

def sarif_start(text: str) -> bool:
    """The text begins as the sarif-2.1.0 format does: '{', whitespace, '"version"'."""
    return re.match(r'\{\s*"version"', text or "") is not None


@pytest.mark.parametrize("stream", [False, True])
def test_security_default_is_sarif_openai(kserver, org_keys, sarif_validator, stream):
    """No response_format on /v1/security: a SARIF 2.1.0 log, valid against the official schema."""
    sec = openai.OpenAI(base_url=kserver.base_url + "/v1/security", api_key=org_keys[1]["acme_security"], max_retries=0,
                        timeout=600)
    if stream:
        text, finish = "", None
        for chunk in sec.chat.completions.create(model="m", messages=SCAN, temperature=0, max_tokens=1500, stream=True):
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
    else:
        r = sec.chat.completions.create(model="m", messages=SCAN, temperature=0, max_tokens=1500)
        text, finish = r.choices[0].message.content, r.choices[0].finish_reason
    assert finish == "stop", text
    assert sarif_start(text)
    log = json.loads(text)
    sarif_validator.validate(log)
    assert log["version"] == "2.1.0" and len(log["runs"]) == 1


@pytest.mark.parametrize("stream", [False, True])
def test_security_default_is_sarif_anthropic(kserver, org_keys, sarif_validator, stream):
    """No output_config.format on /security/v1/messages (Anthropic SDK): a SARIF 2.1.0 log."""
    a = anthropic.Anthropic(base_url=kserver.base_url + "/security", api_key=org_keys[1]["acme_security"], max_retries=0,
                            timeout=600)
    if stream:
        with a.messages.stream(model="m", max_tokens=1500, messages=SCAN, extra_body=GREEDY) as s:
            m = s.get_final_message()
    else:
        m = a.messages.create(model="m", max_tokens=1500, messages=SCAN, extra_body=GREEDY)
    assert m.stop_reason == "end_turn" and len(m.content) == 1, m.content
    sarif_validator.validate(json.loads(m.content[0].text))


def test_security_default_on_completions_and_opt_outs(kserver, org_keys, sarif_validator):
    k = org_keys[1]
    sec = openai.OpenAI(base_url=kserver.base_url + "/v1/security", api_key=k["acme_security"], max_retries=0, timeout=600)
    # /v1/security/completions: the same default (the chat prompt rendered by hand with the
    # model's template, as a completions client does: the chat test's SARIF log).
    prompt = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
              "<|im_start|>user\n" + SCAN[0]["content"] + "<|im_end|>\n<|im_start|>assistant\n")  # SmolLM2's template
    r = sec.completions.create(model="m", prompt=prompt, max_tokens=1500, temperature=0)
    assert r.choices[0].finish_reason == "stop"
    sarif_validator.validate(json.loads(r.choices[0].text))
    # An explicit {"type": "text"} is plain text (both wire formats): no SARIF prefix forced.
    r = sec.chat.completions.create(model="m", messages=MSGS, max_tokens=12, temperature=0,
                                    response_format={"type": "text"})
    assert r.choices[0].message.content and not sarif_start(r.choices[0].message.content)
    a = anthropic.Anthropic(base_url=kserver.base_url + "/security", api_key=k["acme_security"], max_retries=0)
    m = a.messages.create(model="m", max_tokens=12, messages=MSGS,
                          extra_body={**GREEDY, "output_config": {"format": {"type": "text"}}})
    assert m.content[0].text and not sarif_start(m.content[0].text)
    # A diff on request.
    r = sec.chat.completions.create(model="m", messages=SCAN, max_tokens=300, temperature=0,
                                    response_format={"type": "unified-diff"})
    assert r.choices[0].message.content.startswith("--- ")
    # The general endpoint keeps plain text as its default.
    g = openai_client(kserver.base_url, api_key=k["globex_both"])
    r = g.chat.completions.create(model="m", messages=SCAN, max_tokens=12, temperature=0)
    assert not sarif_start(r.choices[0].message.content)


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                   "additionalProperties": False}}}


def test_security_endpoint_with_tools(kserver, org_keys):
    """A forced call is a call (its arguments by the tool's schema), not SARIF; tools the model
    may call (tool_choice auto) leave the answer unconstrained; tool_choice none gets SARIF."""
    k = org_keys[1]
    sec = openai.OpenAI(base_url=kserver.base_url + "/v1/security", api_key=k["acme_security"], max_retries=0, timeout=600)
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = sec.chat.completions.create(model="m", messages=ask, tools=[WEATHER], max_tokens=200, temperature=0,
                                    tool_choice={"type": "function", "function": {"name": "get_weather"}},
                                    parallel_tool_calls=False)
    calls = r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason == "tool_calls" and calls and calls[0].function.name == "get_weather"
    assert isinstance(json.loads(calls[0].function.arguments)["city"], str)
    a = anthropic.Anthropic(base_url=kserver.base_url + "/security", api_key=k["acme_security"], max_retries=0)
    m = a.messages.create(model="m", max_tokens=200, messages=ask, extra_body=GREEDY,
                          tools=[{"name": "get_weather", "description": "Get the weather.",
                                  "input_schema": WEATHER["function"]["parameters"]}],
                          tool_choice={"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True})
    assert m.stop_reason == "tool_use" and m.content[-1].type == "tool_use"
    assert isinstance(m.content[-1].input["city"], str)
    r = sec.chat.completions.create(model="m", messages=ask, tools=[WEATHER], max_tokens=12, temperature=0)
    assert not sarif_start(r.choices[0].message.content)
    r = sec.chat.completions.create(model="m", messages=ask, tools=[WEATHER], tool_choice="none", max_tokens=12,
                                    temperature=0)
    assert sarif_start(r.choices[0].message.content)
