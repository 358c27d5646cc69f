"""Speculative decoding (prompt lookup) on real models: exactness against plain decoding.

- Batch invariance of the cpu backend, through forward()/truncate() only: the logits of a
  position are bit-identical whether it is decoded alone or inside a batch of 2..17 (as
  the verification of a draft does), and with chunked prefill (as after a prefix-cache
  hit). On the default model (Q4_1) and on Qwen2.5-Coder-0.5B (Q4_K/Q6_K/Q5_0/Q8_0
  kernels). (`swz-spec-check batch`)
- Greedy parity: 200 prompts (code edits, prose, unicode, structured text; chat-templated
  and raw) through the Engine, speculative decoding on vs off: identical token ids,
  identical bytes, identical finish reasons and token counts, with the speculative run
  hitting the prefix cache for half of the prompts and not for the others. The suite
  asserts that drafts were both accepted and rejected, so both paths ran.
  (`swz-spec-check parity`)

The sampled (temperature > 0) acceptance rule is tested statistically in
test/unit/engine/{sampler,speculative}_test.cpp, where exact distributions are known.
"""
import json
import os
import random
import subprocess

import pytest

from conftest import ROOT, _missing, openai_client, start_rt

BUILD = os.environ.get("SWZ_BUILD_DIR", os.path.join(ROOT, "build"))
if not os.path.isabs(BUILD):
    BUILD = os.path.join(ROOT, BUILD)
CHECK = os.path.join(BUILD, "test", "tools", "swz-spec-check")
SWIZZLEC = os.environ.get("SWZ_SWIZZLEC", os.path.join(BUILD, "compiler", "swizzlec"))
MAX_TOKENS = 16

CODE = [
    '''def area(shape, *dims):
    """Return the area of a shape."""
    if shape == "circle":
        (r,) = dims
        return 3.14159 * r * r
    if shape == "square":
        (s,) = dims
        return s * s
    raise ValueError(shape)
''',
    '''function total(items) {
  let sum = 0;
  for (const item of items) {
    sum += item.price * item.qty;
  }
  return sum;
}
''',
    '''#include <stdio.h>

int max_of(const int *v, int n) {
    int best = v[0];
    for (int i = 1; i < n; ++i)
        if (v[i] > best) best = v[i];
    return best;
}
''',
    '''fn parse_line(line: &str) -> Option<(String, u32)> {
    let mut parts = line.split(',');
    let name = parts.next()?.trim().to_string();
    let age = parts.next()?.trim().parse().ok()?;
    Some((name, age))
}
''',
    '''class Counter:
    def __init__(self):
        self.counts = {}

    def add(self, key):
        self.counts[key] = self.counts.get(key, 0) + 1

    def most_common(self):
        return max(self.counts, key=self.counts.get)
''',
]
EDITS = [
    "Rename the first function to `compute`.",
    "Add a comment above every loop.",
    "Change the indentation to tabs.",
    "Rewrite the code with one small fix: use a clearer variable name.",
    "Return the whole file unchanged except for a docstring at the top.",
    "Repeat the code exactly, then explain it in one sentence.",
    "Convert the code to use early returns.",
]
PROSE = [
    "The history of computing is a story of abstraction. Each generation of engineers built tools "
    "that hid the details of the one before, from vacuum tubes to transistors to compilers.",
    "Rivers shape the land over millions of years. Water carries sediment downstream, carving valleys "
    "and building deltas where it meets the sea.",
    "A good recipe lists its ingredients in the order they are used, gives exact quantities, and says "
    "what the dish should look like at each step.",
    "In the morning the market fills with voices: vendors calling out prices, children running between "
    "stalls, and the smell of fresh bread drifting from the bakery.",
]
UNICODE = [
    "日本の首都は東京です。東京は世界で最も人口の多い都市の一つです。",
    "Привет, мир! Это тестовая строка на русском языке.",
    "数学公式：∑_{i=1}^{n} i = n(n+1)/2，∀x ∈ ℝ, x² ≥ 0。",
    "Emoji test 🚀🔥✨: the rocket 🚀 launched, the fire 🔥 burned, the stars ✨ shone.",
    "Ελληνικά: Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.",
    "한국어 문장: 오늘 날씨가 정말 좋네요. 산책하러 갈까요?",
    "Mixed: café, naïve, façade, coöperate, Zürich, São Paulo, Kraków.",
]


def structured(rng):
    kind = rng.randrange(4)
    if kind == 0:
        start = rng.randrange(50)
        return ", ".join(str(i) for i in range(start, start + 30)) + ","
    if kind == 1:
        rows = [f"{rng.choice(['alice', 'bob', 'carol', 'dave'])},{rng.randrange(20, 60)},{rng.choice(['NY', 'SF', 'LA'])}" for _ in range(8)]
        return "name,age,city\n" + "\n".join(rows) + "\n"
    if kind == 2:
        items = [{"id": i, "name": f"item{i}", "tags": ["a", "b"]} for i in range(rng.randrange(3, 6))]
        return json.dumps(items, indent=2)[:-2]
    return "\n".join(f"- step {i}: check the value of x{i}" for i in range(1, rng.randrange(6, 10)))


def make_prompts(n=200, seed=5):
    """A fixed mix: 70 code edits (chat), 50 prose, 40 unicode, 40 structured (chat and raw)."""
    rng = random.Random(seed)
    out = []
    for i in range(70):
        code = CODE[i % len(CODE)]
        edit = EDITS[(i // len(CODE)) % len(EDITS)]
        out.append({"messages": [{"role": "user", "content": f"{edit}\n\n```\n{code}```"}]})
    for i in range(50):
        text = PROSE[i % len(PROSE)]
        if i % 2:
            out.append({"text": text[: rng.randrange(40, len(text))]})
        else:
            ask = rng.choice(["Continue this text:", "Summarize:", "Rewrite this more formally:", "Translate to French:"])
            out.append({"messages": [{"role": "user", "content": f"{ask}\n{text}"}]})
    for i in range(40):
        text = UNICODE[i % len(UNICODE)]
        if i % 2:
            out.append({"text": text})
        else:
            out.append({"messages": [{"role": "system", "content": "Answer briefly."},
                                     {"role": "user", "content": f"Repeat and continue: {text}"}]})
    for i in range(40):
        text = structured(rng)
        out.append({"text": text} if i % 2 else {"messages": [{"role": "user", "content": f"Continue:\n{text}"}]})
    rng.shuffle(out)
    return out[:n]


def need(path, what):
    if not os.path.exists(path):
        _missing(f"{what} not found at {path}")


def qwen_package(tmp_path_factory):
    gguf = os.environ.get("SWZ_QWEN_GGUF", "")
    if not gguf or not os.path.exists(gguf):
        _missing("the Qwen2.5-Coder-0.5B GGUF (SWZ_QWEN_GGUF, scripts/fetch-qwen.sh)")
    need(SWIZZLEC, "swizzlec")
    pkg = str(tmp_path_factory.mktemp("spec") / "qwen.swz")
    subprocess.run([SWIZZLEC, "compile", gguf, "--target", "cpu", "-o", pkg], check=True, stdout=subprocess.DEVNULL)
    return pkg


def run_check(*args):
    need(CHECK, "swz-spec-check")
    subprocess.run([CHECK, *args], check=True)


@pytest.mark.parametrize("model", ["default", "qwen"])
def test_batch_invariance(model, package, tmp_path, tmp_path_factory):
    pkg = str(package) if model == "default" else qwen_package(tmp_path_factory)
    text = ("def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n        return n\n"
            "    return")
    out = tmp_path / "bi.json"
    run_check("batch", pkg, text, "24" if model == "qwen" else "40", str(out))
    r = json.loads(out.read_text())
    assert r["rows_compared"] >= 200
    assert r["rows_differing"] == 0, f"{r['rows_differing']} of {r['rows_compared']} rows differ (max |diff| {r['max_abs_diff']})"
    assert r["chunked_prefill_identical"]


def test_greedy_parity_200_prompts(package, tmp_path):
    prompts = make_prompts()
    assert len(prompts) == 200
    pfile = tmp_path / "prompts.json"
    pfile.write_text(json.dumps(prompts, ensure_ascii=False))
    out = tmp_path / "out.json"
    run_check("parity", str(package), str(pfile), str(MAX_TOKENS), str(out))
    res = json.loads(out.read_text())
    assert len(res) == 200
    drafted = accepted = hits = misses = with_accepts = 0
    for i, r in enumerate(res):
        what = f"prompt {i}: {json.dumps(prompts[i], ensure_ascii=False)[:80]}"
        assert r["spec"] == r["plain"], f"{what}: token ids differ"
        assert r["spec_text"] == r["plain_text"], f"{what}: text differs"
        assert r["finish_spec"] == r["finish_plain"], what
        assert r["completion_spec"] == r["completion_plain"] == len(r["spec"]) <= MAX_TOKENS, what
        assert r["drafted_plain"] == 0, what
        assert 0 <= r["accepted"] <= r["drafted"], what
        drafted += r["drafted"]
        accepted += r["accepted"]
        with_accepts += r["accepted"] > 0
        # A whole block or more from the prefix cache, or at most the start of one (a
        # template's first tokens, token-granular reuse): prefilled almost entirely.
        if r["cached_spec"] >= 64:
            hits += 1
        else:
            misses += 1
    print(f"\nspeculative parity: 200 prompts identical; drafted {drafted}, accepted {accepted} "
          f"(acceptance rate {accepted / max(drafted, 1):.3f}); prefix-cache hits {hits}, misses {misses}")
    # Both verification paths and both cache situations were exercised.
    assert with_accepts >= 40 and accepted >= 300
    assert drafted - accepted >= 100
    assert hits >= 60 and misses >= 20


# --- the wire: a real `swizzle-rt serve` (default model) through the official openai SDK ---

SPEC_PROMPT = ("Copy this list exactly, then stop:\napple, banana, cherry, date, elderberry, fig, grape, honeydew, "
               "kiwi, lemon, mango, nectarine, orange, papaya, quince")


def chat(client, spec, **kw):
    raw = client.chat.completions.with_raw_response.create(
        model="m", messages=[{"role": "user", "content": SPEC_PROMPT}], temperature=0, max_tokens=60,
        extra_body={"speculative": spec}, **kw)
    return raw, raw.parse()


@pytest.fixture(scope="module")
def unpriced_client(rt_binary, package, n_ctx):
    """A server that takes every draft the prompt lookup proposes (--no-spec-pricing): with
    draft pricing the drafts depend on measured step times, and this test compares the
    counts of identical requests."""
    s = start_rt(rt_binary, package, n_ctx, "--no-spec-pricing")
    yield openai_client(s.base_url)
    assert s.stop() == 0, s.log()


def test_wire_counts_control_and_stop_inside_accepted_runs(unpriced_client):
    import openai
    client = unpriced_client

    raw_off, off = chat(client, False)
    raw_on, on = chat(client, True)
    text = off.choices[0].message.content
    # Same text, same token count; the counts are in the headers and in usage.
    assert on.choices[0].message.content == text
    assert on.usage.completion_tokens == off.usage.completion_tokens
    assert int(raw_off.headers["x-swizzle-spec-drafted"]) == 0
    drafted = int(raw_on.headers["x-swizzle-spec-drafted"])
    accepted = int(raw_on.headers["x-swizzle-spec-accepted"])
    assert 0 < accepted <= drafted
    d = on.usage.completion_tokens_details
    assert d.accepted_prediction_tokens == accepted
    assert d.rejected_prediction_tokens == drafted - accepted

    # A stop sequence late in the text (where drafts are being accepted): the output ends
    # right before it, finish_reason "stop", and token counts equal plain decoding's.
    k = len(text) * 3 // 4
    stop = text[k:k + 5]
    assert stop.strip(), text
    want = text[:text.index(stop)]
    _, s_on = chat(client, True, stop=[stop])
    _, s_off = chat(client, False, stop=[stop])
    assert s_on.choices[0].message.content == want == s_off.choices[0].message.content
    assert s_on.choices[0].finish_reason == "stop" == s_off.choices[0].finish_reason
    assert s_on.usage.completion_tokens == s_off.usage.completion_tokens < on.usage.completion_tokens

    # Streamed: the same text, the counts in the usage chunk.
    deltas, usage = [], None
    for chunk in client.chat.completions.create(model="m", messages=[{"role": "user", "content": SPEC_PROMPT}],
                                                temperature=0, max_tokens=60, stream=True,
                                                stream_options={"include_usage": True},
                                                extra_body={"speculative": True}):
        if chunk.usage is not None:
            usage = chunk.usage
        if chunk.choices and chunk.choices[0].delta.content:
            deltas.append(chunk.choices[0].delta.content)
    assert "".join(deltas) == text
    assert usage.completion_tokens_details.accepted_prediction_tokens == accepted
    assert usage.completion_tokens_details.rejected_prediction_tokens == drafted - accepted

    # max_tokens inside an accepted run: exactly that many tokens, a prefix of the text.
    for n in (7, 23):
        m = client.chat.completions.create(model="m", messages=[{"role": "user", "content": SPEC_PROMPT}],
                                           temperature=0, max_tokens=n, extra_body={"speculative": True})
        assert m.usage.completion_tokens == n
        assert m.choices[0].finish_reason == "length"
        assert text.startswith(m.choices[0].message.content)

    with pytest.raises(openai.BadRequestError) as e:
        chat(client, "yes")
    assert e.value.param == "speculative"
