"""logprobs / top_logprobs, n > 1 and token-id prompts on the OpenAI surface, through the
official `openai` SDK against a real `swizzle-rt serve` (SmolLM2-135M), plus the
stream/non-stream alignment over the scripted fake engine (pieces that cut UTF-8
characters, stop strings)."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import requests
import openai
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "test" / "parity"))
import models  # noqa: E402

SPEC_PROMPT = ("Copy this list exactly, then stop:\napple, banana, cherry, date, elderberry, fig, grape, honeydew, "
               "kiwi, lemon, mango, nectarine, orange, papaya, quince")


def msgs(text):
    return [{"role": "user", "content": text}]


def entries(choice):
    """A chat choice's logprobs as plain tuples (token, logprob, bytes, top)."""
    return [(e.token, e.logprob, tuple(e.bytes),
             tuple((t.token, t.logprob, tuple(t.bytes)) for t in e.top_logprobs))
            for e in choice.logprobs.content]


def stream_entries(stream):
    """(text, entries, finish_reason) per choice index of a chat stream; the usage chunks."""
    out, usage = {}, []
    for c in stream:
        if not c.choices:
            usage.append(c.usage)
            continue
        ch = c.choices[0]
        text, ents, fin = out.get(ch.index, ("", [], None))
        if ch.delta.content:
            text += ch.delta.content
        if ch.logprobs is not None:
            ents += [(e.token, e.logprob, tuple(e.bytes),
                      tuple((t.token, t.logprob, tuple(t.bytes)) for t in e.top_logprobs))
                     for e in ch.logprobs.content]
        out[ch.index] = (text, ents, ch.finish_reason or fin)
    return out, usage


def test_chat_logprobs_greedy_schema_and_distribution(client):
    r = client.chat.completions.create(model="m", messages=msgs("Name three colors."), temperature=0, max_tokens=16,
                                       logprobs=True, top_logprobs=20)
    ch = r.choices[0]
    content = ch.logprobs.content
    assert ch.logprobs.refusal is None
    assert len(content) == r.usage.completion_tokens > 0
    # The bytes of the entries are the generated text (no stop string, no tool call here).
    assert b"".join(bytes(e.bytes) for e in content).decode() == ch.message.content
    for e in content:
        top = e.top_logprobs
        assert len(top) == 20
        lps = [t.logprob for t in top]
        assert lps == sorted(lps, reverse=True)
        assert sum(math.exp(x) for x in lps) <= 1 + 1e-9
        assert all(x <= 0 for x in lps)
        # Greedy takes the most likely token: it is the first alternative, same value.
        assert (e.token, e.logprob, e.bytes) == (top[0].token, top[0].logprob, top[0].bytes)
        assert bytes(e.bytes).decode("utf-8", errors="replace") == e.token
    # logprobs without top_logprobs: the chosen tokens only, the same values.
    r0 = client.chat.completions.create(model="m", messages=msgs("Name three colors."), temperature=0, max_tokens=16,
                                        logprobs=True)
    assert [(e.token, e.logprob) for e in r0.choices[0].logprobs.content] == [(e.token, e.logprob) for e in content]
    assert all(e.top_logprobs == [] for e in r0.choices[0].logprobs.content)
    # Not asked: null.
    assert client.chat.completions.create(model="m", messages=msgs("Hi"), max_tokens=2).choices[0].logprobs is None


def test_chat_logprobs_stream_equals_non_stream_with_a_stop_string(client):
    kw = dict(model="m", messages=msgs("Write a short poem about the sea."), temperature=0, max_tokens=24,
              logprobs=True, top_logprobs=3)
    full = client.chat.completions.create(**kw).choices[0].message.content
    k = len(full) // 2
    stop = full[k:k + 3]
    assert stop.strip(), full
    r = client.chat.completions.create(stop=[stop], **kw)
    assert r.choices[0].message.content == full[:full.index(stop)]
    per, _ = stream_entries(client.chat.completions.create(stop=[stop], stream=True, **kw))
    text, ents, finish = per[0]
    assert text == r.choices[0].message.content and finish == r.choices[0].finish_reason == "stop"
    assert ents == entries(r.choices[0])
    assert len(ents) == r.usage.completion_tokens


def test_chat_logprobs_same_with_and_without_speculative_decoding(client):
    runs = {}
    for spec in (False, True):
        raw = client.chat.completions.with_raw_response.create(
            model="m", messages=msgs(SPEC_PROMPT), temperature=0, max_tokens=40, logprobs=True, top_logprobs=5,
            extra_body={"speculative": spec})
        runs[spec] = (int(raw.headers["x-swizzle-spec-accepted"]), raw.parse())
    assert runs[False][0] == 0 and runs[True][0] > 0  # drafts were accepted: verified rows were used
    off, on = runs[False][1].choices[0], runs[True][1].choices[0]
    assert on.message.content == off.message.content
    assert entries(on) == entries(off)  # bit-identical logits rows (batch invariance)


def llamacpp_reference(package):
    """llama.cpp's logprobs for one text (test/parity/gen_logprobs_reference.py), for the served model."""
    ref = json.loads((ROOT / "test" / "data" / "parity" / "smollm2-logprobs.json").read_text())
    src = json.loads((Path(package) / "manifest.json").read_text())["source_gguf"]["path"]
    if models.sha256(src) != ref["gguf_sha256"]:
        pytest.skip(f"the served package is not built from the reference's GGUF ({src})")
    return ref


def test_completions_logprobs_equal_llamacpp_prompt_and_decode_side(client, server, package):
    ref = llamacpp_reference(package)
    toks = ref["tokens"]
    assert requests.post(server.base_url + "/tokenize", json={"content": ref["text"]}).json()["tokens"] == toks
    # Prompt side: echo + logprobs evaluates the text as a prompt (batch rows).
    echo = client.completions.create(model="m", prompt=ref["text"], max_tokens=1, temperature=0, logprobs=5, echo=True)
    e = echo.choices[0].logprobs
    assert echo.usage.prompt_tokens == len(toks) and echo.usage.prompt_tokens_details.cached_tokens == 0
    assert e.token_logprobs[0] is None and e.top_logprobs[0] is None
    assert len(e.tokens) == len(toks) + 1
    for i, r in enumerate(ref["prompt"], start=1):
        assert e.token_logprobs[i] == pytest.approx(r["logprob"], abs=1e-6), i
        # {token: logprob} of the top 5 and the chosen token (compared by value: ids are
        # not on the legacy wire).
        want = {t: lp for t, lp in r["top"]}
        want.setdefault(r["token"], r["logprob"])
        assert sorted(e.top_logprobs[i].values()) == pytest.approx(sorted(want.values()), abs=1e-6), i
        assert e.top_logprobs[i][e.tokens[i]] == e.token_logprobs[i]
    # Schema: offsets add up, the tokens are the text.
    for i in range(1, len(e.tokens)):
        assert e.text_offset[i] == e.text_offset[i - 1] + len(e.tokens[i - 1])
    assert "".join(e.tokens) == echo.choices[0].text and echo.choices[0].text.startswith(ref["text"])
    # Decode side: generated tokens' logprobs (single-row evaluation), chat and completions
    # alike, with and without speculative decoding.
    dec = ref["decode"]
    for spec in (False, True):
        g = client.completions.create(model="m", prompt=toks[:ref["n_prompt"]], max_tokens=len(dec), temperature=0,
                                      logprobs=5, extra_body={"speculative": spec})
        lp = g.choices[0].logprobs
        assert "".join(lp.tokens) == g.choices[0].text and len(lp.tokens) == len(dec)
        assert lp.token_logprobs == pytest.approx([r["logprob"] for r in dec], abs=1e-6)
        for got, r in zip(lp.top_logprobs, dec):
            assert sorted(got.values(), reverse=True) == pytest.approx([x for _, x in r["top"]], abs=1e-6)
    # Streamed echo: the same entries, in order.
    s = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    streamed = ""
    for c in client.completions.create(model="m", prompt=ref["text"], max_tokens=1, temperature=0, logprobs=5,
                                       echo=True, stream=True):
        streamed += c.choices[0].text
        if c.choices[0].logprobs is not None:
            for k in s:
                s[k] += getattr(c.choices[0].logprobs, k)
    assert streamed == echo.choices[0].text
    assert s == {k: getattr(e, k) for k in s}


def test_chat_n_choices_seeded_reproducible_greedy_identical(client):
    kw = dict(model="m", messages=msgs("Tell me a fun fact."), temperature=1.0, max_tokens=12, seed=11, n=3,
              logprobs=True)
    a = client.chat.completions.create(**kw)
    b = client.chat.completions.create(**kw)
    assert [c.index for c in a.choices] == [0, 1, 2]
    texts = [c.message.content for c in a.choices]
    assert texts == [c.message.content for c in b.choices]
    assert len(set(texts)) >= 2, texts
    # Choice 0 is what n=1 with the same seed gives; usage counts the prompt once.
    one = client.chat.completions.create(**{**kw, "n": 1})
    assert one.choices[0].message.content == texts[0]
    assert a.usage.prompt_tokens == one.usage.prompt_tokens
    assert a.usage.completion_tokens == sum(len(c.logprobs.content) for c in a.choices)
    g = client.chat.completions.create(model="m", messages=msgs("Tell me a fun fact."), temperature=0, max_tokens=10, n=3)
    assert len({c.message.content for c in g.choices}) == 1 and len(g.choices) == 3
    assert g.usage.completion_tokens == 3 * client.chat.completions.create(
        model="m", messages=msgs("Tell me a fun fact."), temperature=0, max_tokens=10).usage.completion_tokens


def test_chat_n_stream_and_prefix_reuse(client, server):
    long_prompt = "Here is a list of fruits: " + ", ".join(["apple", "pear", "plum", "fig"] * 20) + ". Pick one."

    def prefilled():
        for line in requests.get(server.base_url + "/metrics").text.splitlines():
            if line.startswith("swizzle_prefill_rows_total"):
                return float(line.split()[-1])
        raise AssertionError("no prefill counter")

    kw = dict(model="m", messages=msgs(long_prompt + " (stream test)"), temperature=1.0, max_tokens=8, seed=5, n=2)
    before = prefilled()
    r = client.chat.completions.create(**kw)
    # The two choices share one prefill of the prompt (and its KV pages): what the cache did
    # not hold (the chat template's first tokens, shorter than a block, may come from an
    # earlier request of this server) is prefilled once.
    cached = r.usage.prompt_tokens_details.cached_tokens
    assert r.usage.prompt_tokens > 64 and cached < 64
    assert prefilled() - before == r.usage.prompt_tokens - cached
    per, usage = stream_entries(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
    assert sorted(per) == [0, 1]
    assert [per[i][0] for i in (0, 1)] == [c.message.content for c in r.choices]
    assert [per[i][2] for i in (0, 1)] == [c.finish_reason for c in r.choices]
    assert len(usage) == 1 and usage[0].completion_tokens == r.usage.completion_tokens
    assert usage[0].prompt_tokens == r.usage.prompt_tokens


def test_completions_n_and_token_id_prompts(client, server):
    text = "def add(a, b):"
    ids = requests.post(server.base_url + "/tokenize", json={"content": text}).json()["tokens"]
    assert ids and all(isinstance(t, int) for t in ids)
    by_text = client.completions.create(model="m", prompt=text, max_tokens=12, temperature=0)
    by_ids = client.completions.create(model="m", prompt=ids, max_tokens=12, temperature=0)
    assert by_ids.choices[0].text == by_text.choices[0].text
    assert by_ids.usage.prompt_tokens == by_text.usage.prompt_tokens == len(ids)
    echo = client.completions.create(model="m", prompt=ids, max_tokens=4, temperature=0, echo=True)
    assert echo.choices[0].text.startswith(text)
    # Several token-id prompts, n choices each: index = prompt * n + j; usage counts each prompt once.
    other = requests.post(server.base_url + "/tokenize", json={"content": "Once upon a time"}).json()["tokens"]
    r = client.completions.create(model="m", prompt=[ids, other], max_tokens=6, temperature=1.0, seed=3, n=2)
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    assert r.usage.prompt_tokens == len(ids) + len(other)
    again = client.completions.create(model="m", prompt=[ids, other], max_tokens=6, temperature=1.0, seed=3, n=2)
    assert [c.text for c in again.choices] == [c.text for c in r.choices]
    first = client.completions.create(model="m", prompt=ids, max_tokens=6, temperature=1.0, seed=3)
    assert first.choices[0].text == r.choices[0].text
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="m", prompt=[ids, [1, 10 ** 6]], max_tokens=2)
    assert e.value.param == "prompt[1][1]"


@pytest.mark.parametrize("kwargs,param", [
    ({"top_logprobs": 3}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"n": 17}, "n"),
    ({"n": 0}, "n"),
])
def test_chat_invalid_logprobs_and_n(client, kwargs, param):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=msgs("hi"), max_tokens=2, **kwargs)
    assert e.value.param == param and e.value.type == "invalid_request_error"


def test_fake_stream_logprobs_follow_held_back_text(fake_client):
    """Pieces cut inside UTF-8 characters and a stop string: streamed entries == non-streamed."""
    for stop in (None, ["done"], ["界!"]):
        kw = dict(model="m", messages=msgs("hi"), logprobs=True, top_logprobs=2, stop=stop)
        r = fake_client.chat.completions.create(**kw)
        per, _ = stream_entries(fake_client.chat.completions.create(stream=True, **kw))
        assert per[0][0] == r.choices[0].message.content
        assert per[0][1] == entries(r.choices[0])
        # The scripted engine gives token i the logprob -(i+1)/4: one entry per generated token, in order.
        assert [e[1] for e in per[0][1]] == [-(i + 1) / 4 for i in range(r.usage.completion_tokens)]
    c = fake_client.completions.create(model="m", prompt="hi", max_tokens=100, logprobs=2, stop=["done"])
    lp = c.choices[0].logprobs
    assert lp.token_logprobs == [-(i + 1) / 4 for i in range(c.usage.completion_tokens)]
    s = []
    for ch in fake_client.completions.create(model="m", prompt="hi", max_tokens=100, logprobs=2, stop=["done"],
                                            stream=True):
        if ch.choices[0].logprobs is not None:
            s += ch.choices[0].logprobs.token_logprobs
    assert s == lp.token_logprobs


def test_tokenize_follows_llama_cpp_server_defaults(server):
    """/tokenize as llama.cpp's server: add_special false and parse_special true by default;
    with_pieces gives each token's text; /detokenize inverts it."""
    url = server.base_url
    text = "<|im_start|>user\nhello wörld"
    parsed = requests.post(url + "/tokenize", json={"content": text}).json()["tokens"]
    plain = requests.post(url + "/tokenize", json={"content": text, "parse_special": False}).json()["tokens"]
    # The ChatML marker is one control token when parsed, several plain-text tokens when not.
    assert len(plain) > len(parsed)
    assert requests.post(url + "/detokenize", json={"tokens": parsed[:1]}).json()["content"] == "<|im_start|>"
    pieces = requests.post(url + "/tokenize", json={"content": text, "with_pieces": True}).json()["tokens"]
    assert [p["id"] for p in pieces] == parsed
    joined = b"".join(p["piece"].encode() if isinstance(p["piece"], str) else bytes(p["piece"]) for p in pieces)
    assert joined.decode() == text
    bad = requests.post(url + "/tokenize", json={"content": text, "with_pieces": "yes"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "with_pieces"
    # A completions text prompt parses control tokens too (as llama.cpp's server and vLLM).
    r = requests.post(url + "/v1/completions", json={"model": "m", "prompt": text, "max_tokens": 1, "temperature": 0}).json()
    assert r["usage"]["prompt_tokens"] == len(parsed)
