"""The `swizzle-rt` command line (server/main.cpp) over the scripted FakeEngine
(swizzle_rt_fake): `run` prints whole characters then timings, `serve` prints the
listening line, honours --api-key, and load errors exit 2 with the reason."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import openai
import pytest

from conftest import ROOT, ServerProcess, openai_client

TEXT = "Hello 😀 世界!"


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    b = Path(os.environ.get("SWZ_RT_FAKE", ROOT / "build/test/unit/server/swizzle_rt_fake"))
    if not b.exists():
        pytest.skip("swizzle_rt_fake not built")
    pkg = tmp_path_factory.mktemp("p") / "model.swz"
    pkg.mkdir()
    return b, pkg


def test_run_prints_text_then_timings(cli):
    b, pkg = cli
    r = subprocess.run([str(b), "run", str(pkg), "-p", "hi", "--temp", "0"], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == TEXT + "\n"
    err = r.stderr.decode()
    assert "prompt: 10 tokens (0 cached)" in err  # "user:hi\n" + 2
    assert "generated: 7 tokens" in err and "finish: stop" in err


def test_run_max_tokens_and_raw(cli):
    b, pkg = cli
    r = subprocess.run([str(b), "run", str(pkg), "-p", "hi", "-n", "2", "--raw"], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == "Hello\n"
    assert "prompt: 2 tokens" in r.stderr.decode()  # raw: the 2 bytes of "hi"
    assert "finish: length" in r.stderr.decode()


def test_run_rejects_bad_arguments_and_missing_package(cli, tmp_path):
    b, pkg = cli
    r = subprocess.run([str(b), "run", str(tmp_path / "nope.swz"), "-p", "hi"], capture_output=True, timeout=60)
    assert r.returncode == 2
    assert b"cannot load" in r.stderr and b"nope.swz" in r.stderr
    r = subprocess.run([str(b), "run", str(pkg), "-p", "hi", "--chat", "--raw"], capture_output=True, timeout=60)
    assert r.returncode != 0
    r = subprocess.run([str(b), "run", str(pkg)], capture_output=True, timeout=60)
    assert r.returncode != 0 and b"prompt" in r.stderr


def test_serve_with_api_key(cli):
    b, pkg = cli
    s = ServerProcess([str(b), "serve", str(pkg), "--port", "0", "-c", "128", "--api-key", "k1"])
    try:
        with pytest.raises(openai.AuthenticationError):
            openai_client(s.base_url, api_key="k2").models.list()
        c = openai_client(s.base_url, api_key="k1")
        r = c.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
        assert r.choices[0].message.content == TEXT
        with pytest.raises(openai.BadRequestError) as e:
            c.chat.completions.create(model="x", messages=[{"role": "user", "content": "y" * 200}])
        assert "128 tokens" in e.value.message  # -c reached the engine's n_ctx
    finally:
        assert s.stop() == 0, s.log()
