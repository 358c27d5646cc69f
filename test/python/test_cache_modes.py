"""Cache modes (issue 15: `exact`, `reorder`, `approx`) through a real
`swizzle-rt serve` of the default model, driven by the official `openai` and `anthropic`
SDKs: the field / header select the mode, responses report it, a prompt without code
gets the same greedy answer in both modes, after a function of a pinned file is edited
twice, `reorder` reuses more of the prompt than `exact` on the second edit, and `approx`
reuses the functions after the edited one already at the first edit.
Environment: see conftest.py (SWZ_RT, SWZ_PACKAGE, SWZ_REQUIRE).
"""
from __future__ import annotations

import anthropic
import openai
import pytest

from conftest import metric, openai_client, scrape_metrics, start_rt

CTX = 2048

# A pinned Python file: eight functions, ~700 tokens; the edits change the first one.
FUNCS = [
    f"def step_{i}(values, limit={i + 2}):\n"
    f"    \"\"\"Keep the values below {i + 2}, squared, in order; an empty list stays empty.\"\"\"\n"
    f"    kept = [v for v in values if v < limit]\n"
    f"    return [v * v for v in kept]\n"
    for i in range(8)
]


def pinned(first: str) -> str:
    body = "import math\nimport os\n\n\n" + "\n\n".join([first] + FUNCS[1:])
    return f"Task: keep steps.py tidy.\n\nPinned files:\n<file path=\"pkg/steps.py\">\n{body}</file>\n"


EDIT_1 = FUNCS[0].replace("return [v * v for v in kept]", "return [v * v for v in kept if v >= 0]")
EDIT_2 = FUNCS[0].replace("return [v * v for v in kept]", "return [abs(v) * abs(v) for v in kept if v >= 0]")


def session(first_fn: str, note: str) -> list:
    return [{"role": "system", "content": "You are a terse coding assistant."},
            {"role": "user", "content": pinned(first_fn)},
            {"role": "assistant", "content": "Read it."},
            {"role": "user", "content": f"{note} What does step_3 return for [1, 2, 9]?"}]


def chat(client, messages, mode: str | None, **kw):
    extra = {"swizzle_cache_mode": mode} if mode else None
    raw = client.chat.completions.with_raw_response.create(
        model="m", messages=messages, max_tokens=8, temperature=0, extra_body=extra, **kw)
    return raw.headers, raw.parse()


@pytest.fixture(scope="module")
def servers(rt_binary, package):
    """Two fresh servers, so neither mode sees the other's cache: exact (default) and one
    whose default is reorder."""
    exact = start_rt(rt_binary, package, CTX)
    reorder = start_rt(rt_binary, package, CTX, "--cache-mode", "reorder")
    yield exact, reorder
    for s in (exact, reorder):
        assert s.stop() == 0, s.log()


def test_reorder_keeps_more_of_the_prompt_on_a_second_edit(servers):
    exact, reorder = servers
    results = {}
    for name, srv, mode in (("exact", exact, "exact"), ("reorder", reorder, None)):  # reorder: the server default
        c = openai_client(srv.base_url)
        cached = []
        for first, note in ((FUNCS[0], "Turn one."), (EDIT_1, "Turn two."), (EDIT_2, "Turn three.")):
            headers, r = chat(c, session(first, note), mode)
            assert headers["X-Swizzle-Cache-Mode"] == name
            assert r.usage.model_extra["swizzle_cache_mode"] == name
            assert int(headers["X-Swizzle-Cache-Hit-Tokens"]) == r.usage.prompt_tokens_details.cached_tokens
            cached.append(r.usage.prompt_tokens_details.cached_tokens)
        results[name] = cached
    # The first edit costs both modes the prefix from the edited function on.
    assert results["exact"][0] == 0 and results["reorder"][0] == 0
    # The second edit: exact breaks at step_0 again (right after the imports); reorder has
    # moved step_0 behind step_7 at the first edit, so step_1..step_7 stay cached.
    assert results["reorder"][2] >= results["exact"][2] + 256, results


def test_prompt_without_code_answers_the_same_in_both_modes(servers):
    exact, reorder = servers
    msgs = [{"role": "user", "content": "Name three colours of the rainbow, comma separated."}]
    _, a = chat(openai_client(exact.base_url), msgs, "exact")
    _, b = chat(openai_client(reorder.base_url), msgs, "reorder")
    assert a.usage.prompt_tokens == b.usage.prompt_tokens
    assert a.choices[0].message.content == b.choices[0].message.content
    assert b.usage.model_extra["swizzle_cache_mode"] == "reorder"


def test_anthropic_wire_header_and_usage(servers):
    exact, _ = servers
    client = anthropic.Anthropic(base_url=exact.base_url, api_key="unused", max_retries=0, timeout=120)
    raw = client.messages.with_raw_response.create(
        model="m", max_tokens=8, messages=[{"role": "user", "content": pinned(FUNCS[0])}],
        extra_headers={"X-Swizzle-Cache-Mode": "reorder"})
    assert raw.headers["X-Swizzle-Cache-Mode"] == "reorder"
    body = raw.http_response.json()
    assert body["usage"]["swizzle_cache_mode"] == "reorder"
    assert body["usage"]["cache_read_input_tokens"] == int(raw.headers["X-Swizzle-Cache-Hit-Tokens"])
    # Streamed: message_start's usage names the mode as well.
    with client.messages.stream(model="m", max_tokens=4,
                                messages=[{"role": "user", "content": "Hi"}],
                                extra_body={"swizzle_cache_mode": "reorder"}) as s:
        assert s.response.headers["X-Swizzle-Cache-Mode"] == "reorder"
        final = s.get_final_message()
    assert final.usage.model_extra["swizzle_cache_mode"] == "reorder"


def test_approx_reuses_the_atoms_after_an_early_edit_in_both_wire_formats(servers):
    exact_srv, _ = servers
    # Its own server state: approx requests keep cache blocks apart from exact ones anyway.
    c = openai_client(exact_srv.base_url)
    cached = {}
    # A file no earlier test pinned (so exact's prefix cache holds only the system prompt).
    fresh = lambda msgs: [{**m, "content": m["content"].replace("step_", "stage_")} for m in msgs]
    for mode in ("exact", "approx"):
        got = []
        for first, note in ((FUNCS[0], "Approx turn one."), (EDIT_1, "Approx turn two.")):
            headers, r = chat(c, fresh(session(first, note)), mode)
            assert headers["X-Swizzle-Cache-Mode"] == mode
            assert r.usage.model_extra["swizzle_cache_mode"] == mode
            assert int(headers["X-Swizzle-Cache-Hit-Tokens"]) == r.usage.prompt_tokens_details.cached_tokens
            got.append(r.usage.prompt_tokens_details.cached_tokens)
        cached[mode] = got
    # Turn one: approx's namespace holds nothing of exact's (the prompts are new to it).
    assert cached["approx"][0] == 0, cached
    # The edit of step_0 (right after the imports) breaks exact's prefix there; approx
    # installs step_1 .. step_7 (all but each one's recomputed first 15%) at their new places.
    assert cached["approx"][1] >= cached["exact"][1] + 256, cached
    # The Anthropic wire, by header: the second edit is served the same way, and reported.
    client = anthropic.Anthropic(base_url=exact_srv.base_url, api_key="unused", max_retries=0, timeout=120)
    msgs = fresh(session(EDIT_2, "Approx turn three."))
    raw = client.messages.with_raw_response.create(model="m", max_tokens=8, system=msgs[0]["content"], messages=msgs[1:],
                                                  extra_headers={"X-Swizzle-Cache-Mode": "approx"})
    assert raw.headers["X-Swizzle-Cache-Mode"] == "approx"
    body = raw.http_response.json()
    assert body["usage"]["swizzle_cache_mode"] == "approx"
    assert body["usage"]["cache_read_input_tokens"] == int(raw.headers["X-Swizzle-Cache-Hit-Tokens"])
    assert body["usage"]["cache_read_input_tokens"] >= cached["exact"][1] + 256, (body["usage"], cached)
    # Saved: stage_0 .. stage_7 at turn one, each edited stage_0 after (the imports, 6 tokens,
    # are under the 8-token minimum); found: stage_1 .. stage_7 at each edit.
    m = scrape_metrics(exact_srv.base_url)
    assert metric(m, "swizzle_approx_atoms") == 10
    assert metric(m, "swizzle_approx_atom_hits_total") == 14
    # Every atom found had its blocks in the prefix cache (where its K/V stays).
    assert metric(m, "swizzle_approx_atom_stale_total") == 0
