"""Prefix-cache reporting, the usage ledger and /metrics on a real `swizzle-rt serve` with a
real compiled model, over real HTTP (the official `openai` SDK, `requests`, and
`prometheus_client`'s text parser).

- cached-token reporting: a cold call reports 0 cached tokens, a repeat reports > 0 and
  never more than prompt_tokens, in usage (non-streamed and the include_usage chunk) and
  in the X-Swizzle-Cache-Hit-Tokens / X-Swizzle-Uncached-Tokens headers, which agree;
- the ledger: two named keys from --api-keys-file plus an --admin-key, prices from
  --prices; each response's X-Swizzle-Cost-USD and every /v1/usage row equal, exactly
  (decimal arithmetic), what the prices file and the reported usage give;
- /metrics parses as Prometheus text and its counters move by exactly the usage of the
  requests made in between.

Env: see conftest.py (SWZ_RT, SWZ_PACKAGE, SWZ_CTX, SWZ_REQUIRE).
"""
from __future__ import annotations

import json
import time
from decimal import Decimal

import pytest
import requests

from conftest import metric, openai_client, scrape_metrics, start_rt

# A system prompt of a few hundred tokens, so a repeat shares whole cache blocks
# (64 tokens each in the paged prefix cache), not only the template's first tokens.
SYSTEM = ("You are a careful coding assistant working in a Python repository. " +
          " ".join(f"Rule {i}: keep functions short, name things plainly, and test behaviour {i}." for i in range(24)))
PRICES = {"$comment": "test prices, USD per million tokens",
          "default": {"input": 0.15, "output": 0.6}}  # cached_input: a tenth of input
MTOK = Decimal(1_000_000)


def msgs(user: str):
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def expected_cost(prompt: int, cached: int, output: int) -> Decimal:
    p = PRICES["default"]
    inp, out = Decimal(str(p["input"])), Decimal(str(p["output"]))
    return ((prompt - cached) * inp + cached * inp / 10 + output * out) / MTOK


def call(client, user: str, stream: bool, max_tokens: int = 8):
    """One greedy request; returns (usage, headers) with usage as a dict."""
    kw = dict(model="any", messages=msgs(user), temperature=0, max_tokens=max_tokens)
    if not stream:
        raw = client.chat.completions.with_raw_response.create(**kw)
        return raw.parse().usage.model_dump(), raw.headers
    usage = None
    with client.chat.completions.with_streaming_response.create(stream=True, stream_options={"include_usage": True},
                                                                **kw) as resp:
        headers = resp.headers
        for chunk in resp.parse():
            if chunk.usage is not None:
                usage = chunk.usage.model_dump()
    assert usage is not None, "include_usage: the last chunk carries usage"
    return usage, headers


def check_headers(usage, headers):
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    assert 0 <= cached <= usage["prompt_tokens"]
    assert int(headers["X-Swizzle-Cache-Hit-Tokens"]) == cached
    assert int(headers["X-Swizzle-Uncached-Tokens"]) == usage["prompt_tokens"] - cached
    return cached


@pytest.mark.parametrize("stream", [False, True], ids=["non_stream", "stream"])
def test_cold_call_reports_zero_cached_and_a_repeat_reports_the_shared_prefix(rt_binary, package, n_ctx, stream):
    s = start_rt(rt_binary, package, n_ctx)  # a fresh process: nothing cached yet
    try:
        c = openai_client(s.base_url)
        u1, h1 = call(c, "Explain what a context manager is.", stream)
        assert check_headers(u1, h1) == 0, u1
        u2, h2 = call(c, "Explain what a context manager is.", stream)
        cached = check_headers(u2, h2)
        assert u2["prompt_tokens"] == u1["prompt_tokens"]
        assert cached > 0, u2
        # The whole system prompt is shared: at least its full 64-token blocks are reused.
        assert cached >= (u2["prompt_tokens"] - 40) // 64 * 64, u2
    finally:
        assert s.stop() == 0, s.log()


@pytest.fixture(scope="module")
def priced_server(rt_binary, package, n_ctx, tmp_path_factory):
    d = tmp_path_factory.mktemp("ledger")
    (d / "prices.json").write_text(json.dumps(PRICES))
    (d / "keys.txt").write_text("# name key\nalice sk-alice-123\nbob sk-bob-456\n")
    s = start_rt(rt_binary, package, n_ctx, "--api-keys-file", str(d / "keys.txt"), "--admin-key", "sk-root-789",
                 "--prices", str(d / "prices.json"))
    yield s
    assert s.stop() == 0, s.log()


def usage_of(server, key):
    r = requests.get(server.base_url + "/v1/usage", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def test_ledger_two_keys_costs_add_up_exactly(priced_server):
    s = priced_server
    alice, bob = openai_client(s.base_url, api_key="sk-alice-123"), openai_client(s.base_url, api_key="sk-bob-456")
    done = {"alice": [], "bob": []}
    for who, client, user, stream in [("alice", alice, "Name one sorting algorithm.", False),
                                      ("alice", alice, "Name one sorting algorithm.", True),
                                      ("bob", bob, "What does git rebase do?", False),
                                      ("alice", alice, "What is a closure?", False)]:
        usage, headers = call(client, user, stream)
        cached = check_headers(usage, headers)
        full = expected_cost(usage["prompt_tokens"], cached, usage["completion_tokens"])
        prompt_only = expected_cost(usage["prompt_tokens"], cached, 0)
        # Streams send headers before generating: the header holds the prompt's cost.
        assert Decimal(headers["X-Swizzle-Cost-USD"]) == (prompt_only if stream else full), (usage, headers)
        done[who].append((usage, cached, full))

    ids = {"alice": "alice", "bob": "bob"}
    for who, key in [("alice", "sk-alice-123"), ("bob", "sk-bob-456")]:
        u = usage_of(s, key)
        assert u["key_id"] == ids[who] and u["scope"] == "own"
        assert [row["key_id"] for row in u["data"]] == [ids[who]], "a key sees only its own rows"
        row = u["data"][0]
        assert row["requests"] == len(done[who])
        assert row["input_tokens"] == sum(x[0]["prompt_tokens"] - x[1] for x in done[who])
        assert row["cached_input_tokens"] == sum(x[1] for x in done[who])
        assert row["output_tokens"] == sum(x[0]["completion_tokens"] for x in done[who])
        assert Decimal(row["cost_usd_exact"]) == sum(x[2] for x in done[who])
        assert row["cost_usd"] == float(Decimal(row["cost_usd_exact"]))
        assert Decimal(row["cost_usd_exact"]) > 0

    admin = usage_of(s, "sk-root-789")
    assert admin["scope"] == "all"
    assert sorted(r["key_id"] for r in admin["data"]) == ["alice", "bob"]
    everything = [x for v in done.values() for x in v]
    assert admin["total"]["requests"] == len(everything)
    assert Decimal(admin["total"]["cost_usd_exact"]) == sum(x[2] for x in everything)
    text = requests.get(s.base_url + "/v1/usage", headers={"Authorization": "Bearer sk-root-789"}, timeout=30).text
    assert "sk-alice" not in text and "sk-bob" not in text, "keys are never shown in clear"

    assert requests.get(s.base_url + "/v1/usage", timeout=30).status_code == 401
    assert requests.get(s.base_url + "/v1/usage", headers={"Authorization": "Bearer sk-nope"},
                        timeout=30).status_code == 401


def test_metrics_parse_and_move_by_the_requests_usage(priced_server):
    s = priced_server
    before = scrape_metrics(s.base_url)
    client = openai_client(s.base_url, api_key="sk-bob-456")
    usages = [call(client, "Say hi.", False)[0], call(client, "Say hi.", True)[0], call(client, "Say bye.", False, 4)[0]]
    assert requests.get(s.base_url + "/no-such-path", headers={"Authorization": "Bearer sk-bob-456"}, timeout=30).status_code == 404
    assert requests.get(s.base_url + "/no-such-path", timeout=30).status_code == 401  # keys configured: every path but the probes
    assert requests.post(s.base_url + "/tokenize", json={"content": "hi"}, timeout=30).status_code == 401
    assert requests.get(s.base_url + "/v1/models", headers={"Authorization": "Bearer bad"}, timeout=30).status_code == 401
    ep = "/v1/chat/completions"

    # Responses are counted once their last byte is written: allow the server a moment.
    for _ in range(100):
        after = scrape_metrics(s.base_url)
        if metric(after, "swizzle_requests_total", endpoint="other", status="404") > \
                metric(before, "swizzle_requests_total", endpoint="other", status="404"):
            break
        time.sleep(0.05)

    def delta(name, **labels):
        return metric(after, name, **labels) - metric(before, name, **labels)

    prompt = sum(u["prompt_tokens"] for u in usages)
    cached = sum(u["prompt_tokens_details"]["cached_tokens"] for u in usages)
    output = sum(u["completion_tokens"] for u in usages)
    assert delta("swizzle_requests_total", endpoint=ep, status="200") == 3
    assert delta("swizzle_requests_total", endpoint="other", status="404") == 1
    assert delta("swizzle_requests_total", endpoint="/v1/models", status="401") == 1
    assert delta("swizzle_prompt_tokens_total", endpoint=ep) == prompt
    assert delta("swizzle_prompt_cached_tokens_total", endpoint=ep) == cached
    assert delta("swizzle_generation_tokens_total", endpoint=ep) == output
    assert delta("swizzle_time_to_first_token_seconds_count", endpoint=ep) == sum(u["completion_tokens"] > 0 for u in usages)
    assert delta("swizzle_inter_token_latency_seconds_count", endpoint=ep) == sum(max(u["completion_tokens"] - 1, 0)
                                                                                  for u in usages)
    assert delta("swizzle_request_duration_seconds_count", endpoint=ep) == 3
    assert delta("swizzle_time_to_first_token_seconds_bucket", endpoint=ep, le="+Inf") == \
        delta("swizzle_time_to_first_token_seconds_count", endpoint=ep)
    assert delta("swizzle_time_to_first_token_seconds_sum", endpoint=ep) > 0
    cost = sum(expected_cost(u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"], u["completion_tokens"])
               for u in usages)
    model = openai_client(s.base_url, api_key="sk-bob-456").models.list().data[0].id
    assert delta("swizzle_cost_usd_total", model=model) == pytest.approx(float(cost), rel=1e-9)

    # The engine's own prefix-cache counters: all zero for an engine without a prefix
    # cache; otherwise its hits and misses are the requests' cached and uncached tokens.
    hit, miss = delta("swizzle_prefix_cache_hit_tokens_total"), delta("swizzle_prefix_cache_miss_tokens_total")
    total_hit = metric(after, "swizzle_prefix_cache_hit_tokens_total") + metric(after, "swizzle_prefix_cache_miss_tokens_total")
    if total_hit == 0:
        assert metric(after, "swizzle_prefix_cache_hit_ratio") == 0
    else:
        assert (hit, miss) == (cached, prompt - cached)
        ratio = metric(after, "swizzle_prefix_cache_hit_ratio")
        assert ratio == pytest.approx(metric(after, "swizzle_prefix_cache_hit_tokens_total") / total_hit)
    for tier in ("device", "host", "disk"):
        assert ("swizzle_prefix_cache_blocks", (("tier", tier),)) in after
    assert ("swizzle_prefix_cache_evictions_total", ()) in after
