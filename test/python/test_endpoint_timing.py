"""Every endpoint that runs the engine records the same things (issue 14: TTFT / ITL /
duration histograms stayed at 0 for /v1/completions and /v1/messages, and completions sent
no X-Swizzle-Spec-* headers): the timing histograms of /metrics move for /v1/completions
and /v1/messages, streamed or not, exactly as the usage says; non-streamed answers carry
the same generation headers as chat. On the fake engine (exact counts) and on the real
`swizzle-rt serve` (speculative decoding drafting for real).
"""
from __future__ import annotations

import json

import requests

from conftest import metric, scrape_metrics

GENERATION_HEADERS = ["X-Swizzle-Cache-Hit-Tokens", "X-Swizzle-Uncached-Tokens", "X-Swizzle-Cost-USD",
                      "X-Swizzle-Spec-Drafted", "X-Swizzle-Spec-Accepted"]
HISTOGRAMS = ["swizzle_time_to_first_token_seconds", "swizzle_inter_token_latency_seconds",
              "swizzle_request_duration_seconds"]
# Repetitive text: prompt lookup finds n-grams to draft from.
REPEAT = "one two three four five six seven eight. " * 6


def completions(base_url: str, text: str, stream: bool, **extra) -> tuple[dict, requests.Response]:
    """One /v1/completions request; returns its usage and the response."""
    body = {"prompt": text, "max_tokens": 12, "temperature": 0, **extra}
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    r = requests.post(base_url + "/v1/completions", json=body, timeout=120, stream=stream)
    assert r.status_code == 200, r.text
    if not stream:
        return r.json()["usage"], r
    usage = None
    for line in r.iter_lines():
        if line.startswith(b"data: {"):
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                usage = chunk["usage"]
    assert usage is not None
    return usage, r


def messages(base_url: str, text: str, stream: bool) -> tuple[dict, requests.Response]:
    """One /v1/messages request; returns its usage (as OpenAI counts: prompt / completion) and the response."""
    body = {"model": "m", "max_tokens": 12, "temperature": 0, "stream": stream,
            "messages": [{"role": "user", "content": text}]}
    r = requests.post(base_url + "/v1/messages", json=body, timeout=120, stream=stream,
                      headers={"anthropic-version": "2023-06-01"})
    assert r.status_code == 200, r.text
    if not stream:
        u = r.json()["usage"]
    else:
        u = None
        for line in r.iter_lines():
            if line.startswith(b"data: {"):
                ev = json.loads(line[6:])
                if ev["type"] == "message_delta":
                    u = ev["usage"]
        assert u is not None
    prompt = u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"]
    return {"prompt_tokens": prompt, "completion_tokens": u["output_tokens"]}, r


def check_histograms_move(base_url: str, text: str):
    before = scrape_metrics(base_url)
    runs = {"/v1/completions": [completions(base_url, text, False)[0], completions(base_url, text, True)[0]],
            "/v1/messages": [messages(base_url, text, False)[0], messages(base_url, text, True)[0]]}
    after = scrape_metrics(base_url)
    for ep, usages in runs.items():
        def delta(name):
            return metric(after, name, endpoint=ep) - metric(before, name, endpoint=ep)
        with_tokens = sum(u["completion_tokens"] > 0 for u in usages)
        assert with_tokens == 2, usages
        assert delta("swizzle_time_to_first_token_seconds_count") == with_tokens, ep
        assert delta("swizzle_inter_token_latency_seconds_count") == sum(u["completion_tokens"] - 1 for u in usages), ep
        assert delta("swizzle_request_duration_seconds_count") == len(usages), ep
        for h in HISTOGRAMS:
            assert delta(h + "_sum") > 0, (ep, h)
            assert metric(after, h + "_bucket", endpoint=ep, le="+Inf") == metric(after, h + "_count", endpoint=ep)
        assert delta("swizzle_generation_tokens_total") == sum(u["completion_tokens"] for u in usages), ep


def check_generation_headers(base_url: str, text: str, **extra):
    """Completions and messages carry chat's generation headers, and the spec counts
    equal the usage's prediction tokens."""
    chat = requests.post(base_url + "/v1/chat/completions", timeout=120, json={
        "messages": [{"role": "user", "content": text}], "max_tokens": 12, "temperature": 0, **extra})
    assert chat.status_code == 200
    usage, comp = completions(base_url, text, False, **extra)
    _, msg = messages(base_url, text, False)
    for r in (chat, comp, msg):
        missing = [h for h in GENERATION_HEADERS if h not in r.headers]
        assert not missing, (r.url, missing)
    drafted, accepted = int(comp.headers["X-Swizzle-Spec-Drafted"]), int(comp.headers["X-Swizzle-Spec-Accepted"])
    details = usage["completion_tokens_details"]
    assert details["accepted_prediction_tokens"] == accepted
    assert details["rejected_prediction_tokens"] == drafted - accepted
    assert int(comp.headers["X-Swizzle-Uncached-Tokens"]) + int(comp.headers["X-Swizzle-Cache-Hit-Tokens"]) == \
        usage["prompt_tokens"]
    return drafted, accepted


def test_fake_completions_and_messages_record_timing(fake_server):
    check_histograms_move(fake_server.base_url, "hi")  # the fake's context is 64 tokens


def test_fake_generation_headers_on_every_endpoint(fake_server):
    drafted, accepted = check_generation_headers(fake_server.base_url, "hi")
    assert drafted == accepted == 0  # the fake engine never drafts


def test_real_completions_and_messages_record_timing(server):
    check_histograms_move(server.base_url, REPEAT)


def test_real_completions_spec_headers_count_the_drafts(server):
    drafted, accepted = check_generation_headers(server.base_url, REPEAT, speculative=True)
    assert drafted > 0, "prompt lookup drafted nothing on a repetitive prompt"
    assert 0 <= accepted <= drafted
