"""POST /v1/completions (OpenAI legacy completions) through the `openai` SDK: exact
values against the fake engine, stream == non-stream on a real model."""
from __future__ import annotations

import openai
import pytest

from conftest import openai_client

FAKE_TEXT = "Hello 😀 世界! 🇫🇷 done."


def test_fake_completion_echo_and_prompt_list(fake_client):
    r = fake_client.completions.create(model="m", prompt="hi", max_tokens=100)
    assert r.object == "text_completion" and r.id.startswith("cmpl-")
    assert r.choices[0].text == FAKE_TEXT and r.choices[0].finish_reason == "stop"
    assert r.usage.prompt_tokens == 2 and r.usage.completion_tokens == 10
    e = fake_client.completions.create(model="m", prompt="hi", max_tokens=100, echo=True)
    assert e.choices[0].text == "hi" + FAKE_TEXT
    two = fake_client.completions.create(model="m", prompt=["a", "bc"], max_tokens=3)
    assert [c.index for c in two.choices] == [0, 1]
    assert all(c.finish_reason == "length" for c in two.choices)
    assert two.usage.prompt_tokens == 3 and two.usage.completion_tokens == 6
    d = fake_client.completions.create(model="m", prompt="hi")  # OpenAI's default max_tokens is 16
    assert d.usage.completion_tokens == 10


def test_fake_completion_stream_matches_and_usage_only_when_asked(fake_client):
    chunks = list(fake_client.completions.create(model="m", prompt="hi", max_tokens=100, stream=True,
                                                 stop=["done"], stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == FAKE_TEXT[:FAKE_TEXT.index("done")]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 10
    plain = list(fake_client.completions.create(model="m", prompt="hi", max_tokens=100, stream=True))
    assert all(c.usage is None for c in plain)
    assert [c.choices[0].finish_reason for c in plain][-1] == "stop"


@pytest.mark.parametrize("kwargs,param", [
    ({"logprobs": 6}, "logprobs"),
    ({"logprobs": -1}, "logprobs"),
    ({"n": 17}, "n"),
    ({"temperature": -1}, "temperature"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"top_p": 1.5}, "top_p"),
    ({"prompt": [1, 2, 300]}, "prompt[2]"),
    ({"prompt": [[1, 2], [7, -4]]}, "prompt[1][1]"),
    ({"prompt": [[]]}, "prompt[0]"),
    ({"prompt": [1, "a"]}, "prompt[1]"),
    ({"prompt": ""}, "prompt"),
])
def test_fake_completion_errors(fake_client, kwargs, param):
    args = {"model": "m", "prompt": "hi", **kwargs}
    with pytest.raises(openai.BadRequestError) as e:
        fake_client.completions.create(**args)
    assert e.value.param == param and e.value.type == "invalid_request_error"


def test_real_completion_stream_equals_non_stream(client):
    kw = dict(model="m", prompt="def fibonacci(n):", max_tokens=24, temperature=0)
    r = client.completions.create(**kw)
    s = "".join(c.choices[0].text for c in client.completions.create(stream=True, **kw) if c.choices)
    assert s == r.choices[0].text and r.usage.completion_tokens <= 24
