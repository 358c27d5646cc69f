"""The `swizzle-rt` command line (server/main.cpp) over the scripted FakeEngine
(swizzle_rt_fake): `run` prints whole characters then timings, `serve` prints the
listening line, honours --api-key (repeatable), --api-keys-file, --admin-key, --prices
(and refuses bad files with exit 1) and --shutdown-grace, and load errors exit 2 with the
reason."""
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


def test_serve_shutdown_grace(cli):
    """--shutdown-grace S: on SIGTERM a running stream gets S seconds, then is cut with an
    error event (not a normal end) and the process exits 0."""
    import signal
    import time

    b, pkg = cli
    r = subprocess.run([str(b), "serve", str(pkg), "--shutdown-grace", "-1"], capture_output=True, timeout=60)
    assert r.returncode != 0 and b"--shutdown-grace" in r.stderr
    s = ServerProcess([str(b), "serve", str(pkg), "--port", "0", "-c", "1000000", "--shutdown-grace", "0.5"])
    try:
        it = iter(openai_client(s.base_url).chat.completions.create(
            model="x", messages=[{"role": "user", "content": "forever"}], stream=True))
        next(it)
        next(it)
        t0 = time.monotonic()
        s.proc.send_signal(signal.SIGTERM)
        with pytest.raises(openai.APIError, match="shutting down"):
            for _ in it:
                pass
        assert s.proc.wait(timeout=10) == 0, s.log()
        assert 0.3 < time.monotonic() - t0 < 4
        assert "grace period 0.5 s" in s.log() and "cutting 1 running request" in s.log()
    finally:
        s.stop()


def test_serve_with_several_keys_an_admin_key_and_prices(cli, tmp_path):
    import requests
    b, pkg = cli
    (tmp_path / "keys.txt").write_text("alice ka\nkb\nadmin root\n")
    (tmp_path / "prices.json").write_text('{"models": {"fake-model": {"input": 1, "output": 2}}}')
    s = ServerProcess([str(b), "serve", str(pkg), "--port", "0", "-c", "128", "--api-key", "k1", "--api-key", "k2",
                       "--api-keys-file", str(tmp_path / "keys.txt"),
                       "--prices", str(tmp_path / "prices.json")])
    try:
        for key in ("k1", "k2", "ka", "kb", "root"):
            raw = openai_client(s.base_url, api_key=key).chat.completions.with_raw_response.create(
                model="x", messages=[{"role": "user", "content": "hi"}])
            # 10 prompt tokens at 1 USD/Mtok + 7 output tokens at 2 USD/Mtok = 24e-6 USD.
            assert raw.headers["X-Swizzle-Cost-USD"] == "0.000024"
        with pytest.raises(openai.AuthenticationError):
            openai_client(s.base_url, api_key="k3").models.list()
        rows = requests.get(s.base_url + "/v1/usage", headers={"Authorization": "Bearer root"}, timeout=30).json()["data"]
        ids = sorted(r["key_id"] for r in rows)
        assert len(ids) == 5 and "alice" in ids and "admin" in ids
        assert sum(i.startswith("sha256:") for i in ids) == 3  # k1, k2, kb: unnamed, shown by fingerprint
        assert all(r["cost_usd_exact"] == "0.000024" for r in rows)
    finally:
        assert s.stop() == 0, s.log()


@pytest.mark.parametrize("content,needle", [('{"default": {"input": -1, "output": 1}}', "default.input"),
                                            ("not json", "not valid JSON")])
def test_serve_refuses_a_bad_prices_file(cli, tmp_path, content, needle):
    b, pkg = cli
    (tmp_path / "p.json").write_text(content)
    r = subprocess.run([str(b), "serve", str(pkg), "--port", "0", "--prices", str(tmp_path / "p.json")],
                       capture_output=True, timeout=60)
    assert r.returncode == 1
    assert needle.encode() in r.stderr and b"p.json" in r.stderr


def test_serve_refuses_duplicate_keys(cli, tmp_path):
    b, pkg = cli
    (tmp_path / "keys.txt").write_text("a k1\nb k1\n")
    r = subprocess.run([str(b), "serve", str(pkg), "--port", "0", "--api-keys-file", str(tmp_path / "keys.txt")],
                       capture_output=True, timeout=60)
    assert r.returncode == 1 and b"configured twice" in r.stderr
