"""Zero data retention (issue 17 item 4), with a real `swizzle-rt serve` process on the
default model: prompts carrying a canary word go through both wire formats, streamed and
not, with the disk tier of the prefix cache on, execution receipts on and a key store; the
model is made to say the canary back. Then everything the server wrote during the run is
searched for the canary, for other prompt text and for the generated text: its stdout and
stderr, `/metrics`, every file under the run directory (the disk tier's file names and
contents, the key store, the receipt keys, and the server's own working directory, HOME
and TMPDIR, which point there too).

swizzle-rt has one log level (startup lines and one access line per request: method, path,
status, token counts, times; there is no debug or verbose switch), so "every log level" is
this one.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import anthropic
import pytest
import requests

from conftest import openai_client

CANARY = "zebracanary"
# Prompt text that is not the canary, to check prompts at large and not one word.
FILLER = ("Note for the reader: the archive of the lighthouse keeper lists every ship that passed "
          "the northern cape during the winter storms, with the names of the captains and the "
          "cargo they carried, from salted herring to copper wire and wool.")
FILLER_MARK = "lighthouse keeper"
QUESTION = f"The secret word is {CANARY}. {FILLER} What is the secret word?"


def _start(rt_binary: Path, package: Path, n_ctx: int, run: Path, *extra: str):
    """Starts serve with stdout/stderr to files under `run` and cwd/HOME/TMPDIR in it."""
    home = run / "home"
    home.mkdir()
    out, err = open(run / "stdout.log", "w"), open(run / "stderr.log", "w")
    env = dict(os.environ, HOME=str(home), TMPDIR=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    proc = subprocess.Popen([str(Path(rt_binary).resolve()), "serve", str(Path(package).resolve()), "--host", "127.0.0.1", "--port", "0",
                             "-c", str(n_ctx), *extra], stdout=out, stderr=err, cwd=home, env=env)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        m = re.search(r"listening on (http://[^\s:]+:\d+)", (run / "stdout.log").read_text())
        if m:
            return proc, m.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"serve did not start:\n{(run / 'stderr.log').read_text()}")


def _needles(canary_ids: list[int], generated: list[str]) -> dict[str, bytes]:
    """What must appear nowhere: the canary as text (UTF-8, UTF-16, upper case, JSON
    escaped is the same bytes), its token ids as the int32 / uint16 arrays a dump of token
    ids would hold, other prompt text, and every generated answer."""
    n = {
        "canary": CANARY.encode(),
        "canary upper": CANARY.upper().encode(),
        "canary utf-16": CANARY.encode("utf-16-le"),
        "canary token ids (int32 LE)": b"".join(i.to_bytes(4, "little") for i in canary_ids),
        "canary token ids (uint16 LE)": b"".join(i.to_bytes(2, "little") for i in canary_ids),
        "prompt filler": FILLER_MARK.encode(),
    }
    for i, g in enumerate(generated):
        g = g.strip()
        assert len(g) >= 8, f"generated text too short to search for: {g!r}"
        n[f"generated text {i}"] = g.encode()
    return n


def _search(blob: bytes, needles: dict[str, bytes], where: str) -> list[str]:
    low = blob.lower()
    hits = []
    for name, needle in needles.items():
        if needle in blob or (needle.isascii() and needle.lower() in low):
            hits.append(f"{name} in {where}")
    return hits


@pytest.fixture(scope="module")
def zdr_run(rt_binary, package, n_ctx, tmp_path_factory):
    run = tmp_path_factory.mktemp("zdr")
    cache = run / "cache"
    store = run / "keys.json"
    r = subprocess.run([str(rt_binary), "keys", "add", "--org", "acme", "--store", str(store)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    key = r.stdout.strip()
    r = subprocess.run([str(rt_binary), "keygen", str(run / "receipts.key")], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    proc, base = _start(rt_binary, package, n_ctx, run, "--cache-dir", str(cache), "--key-store", str(store),
                        "--receipts", str(run / "receipts.key"))
    try:
        auth = {"Authorization": f"Bearer {key}"}
        canary_ids = requests.post(base + "/tokenize", json={"content": " " + CANARY}, headers=auth).json()["tokens"]
        assert len(canary_ids) >= 2, canary_ids
        # The server's core-dump limit (a crash must not write memory, prompts included, to disk).
        limits = Path(f"/proc/{proc.pid}/limits").read_text()
        generated: list[str] = []
        oa = openai_client(base, api_key=key)
        msgs = [{"role": "user", "content": QUESTION}]
        # OpenAI chat, not streamed and streamed.
        c = oa.chat.completions.create(model="m", messages=msgs, max_tokens=24, temperature=0)
        generated.append(c.choices[0].message.content)
        parts = [ch.choices[0].delta.content or "" for ch in
                 oa.chat.completions.create(model="m", messages=msgs, max_tokens=24, temperature=0, stream=True)
                 if ch.choices]
        generated.append("".join(parts))
        # OpenAI legacy completions (a raw prompt that repeats the canary), both ways.
        raw = f"{FILLER}\nword: {CANARY}\nword: {CANARY}\nword: {CANARY}\nword:"
        c = oa.completions.create(model="m", prompt=raw, max_tokens=12, temperature=0)
        generated.append(c.choices[0].text)
        generated.append("".join(ch.choices[0].text for ch in
                                 oa.completions.create(model="m", prompt=raw, max_tokens=12, temperature=0,
                                                       stream=True) if ch.choices))
        # Anthropic messages, both ways.
        an = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0)
        m = an.messages.create(model="m", max_tokens=24, messages=msgs, extra_body={"temperature": 0})
        generated.append("".join(b.text for b in m.content if b.type == "text"))
        with an.messages.stream(model="m", max_tokens=24, messages=msgs, extra_body={"temperature": 0}) as s:
            generated.append("".join(s.text_stream))
        metrics = requests.get(base + "/metrics").text
        usage = requests.get(base + "/v1/usage", headers=auth).text
    finally:
        proc.send_signal(signal.SIGINT)  # the disk thread finishes its writes before the exit
        rc = proc.wait(timeout=60)
    assert rc == 0, (run / "stderr.log").read_text()
    return {"run": run, "cache": cache, "canary_ids": canary_ids, "generated": generated, "metrics": metrics,
            "usage": usage, "limits": limits}


def test_the_model_said_the_canary_back(zdr_run):
    # Otherwise the search below would not cover completion text that carries it.
    said = [g for g in zdr_run["generated"] if CANARY in g.lower()]
    assert len(said) == 6, zdr_run["generated"]


def test_the_disk_tier_wrote_blocks(zdr_run):
    files = [p for p in zdr_run["cache"].rglob("*") if p.is_file()]
    assert len(files) >= 2, files  # the chat and the raw prompt each fill a 64-token block
    assert all(p.stat().st_size > 1000 for p in files)


def test_nothing_the_server_wrote_holds_prompt_or_completion_text(zdr_run):
    needles = _needles(zdr_run["canary_ids"], zdr_run["generated"])
    hits: list[str] = []
    scanned = 0
    for p in sorted(zdr_run["run"].rglob("*")):
        hits += _search(str(p.relative_to(zdr_run["run"])).encode(), needles, f"file name {p}")
        if p.is_file():
            hits += _search(p.read_bytes(), needles, f"contents of {p}")
            scanned += 1
    hits += _search(zdr_run["metrics"].encode(), needles, "/metrics")
    hits += _search(zdr_run["usage"].encode(), needles, "/v1/usage")
    assert not hits, hits
    # What was searched is real: both logs, the disk tier, the key store, the receipt keys.
    logs = (zdr_run["run"] / "stderr.log").read_text() + (zdr_run["run"] / "stdout.log").read_text()
    assert logs.count("POST /v1/chat/completions 200") == 2 and logs.count("POST /v1/messages 200") == 2, logs
    assert logs.count("POST /v1/completions 200") == 2, logs
    assert "swizzle_requests_total" in zdr_run["metrics"] or "swizzle_" in zdr_run["metrics"]
    assert scanned >= 7


def test_no_core_dumps(zdr_run):
    # A core file would hold the process memory, prompts included: serve sets RLIMIT_CORE to 0.
    line = next(l for l in zdr_run["limits"].splitlines() if l.startswith("Max core file size"))
    assert line.split()[4:6] == ["0", "0"], line


def test_the_search_finds_what_it_looks_for(zdr_run):
    # Positive controls: the same search over what a leak would look like.
    needles = _needles(zdr_run["canary_ids"], zdr_run["generated"])
    ids = zdr_run["canary_ids"]
    assert _search(json.dumps({"content": QUESTION}).encode(), needles, "x")
    assert _search(b"\0" * 5 + b"".join(i.to_bytes(4, "little") for i in ids) + b"\0", needles, "x") == \
        ["canary token ids (int32 LE) in x"]
    assert _search(("log: " + zdr_run["generated"][0].upper()).encode(), needles, "x")


def _keys(rt_binary, store: Path, *args: str) -> str:
    r = subprocess.run([str(rt_binary), "keys", *args, "--store", str(store)], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def _tenant_dirs(cache: Path) -> dict[str, int]:
    """The disk tier's tenant folders (cache/<model>/<tenant>/) and their file counts."""
    return {str(d.relative_to(cache)): sum(1 for f in d.iterdir() if f.is_file())
            for d in cache.glob("*/*") if d.is_dir()}


def test_each_organisation_has_its_own_disk_tier_and_security_keys_stay_off_it(rt_binary, package, n_ctx,
                                                                                tmp_path):
    store = tmp_path / "keys.json"
    acme = _keys(rt_binary, store, "add", "--org", "acme")
    sec = _keys(rt_binary, store, "add", "--org", "sec", "--scope", "security", "--accept-terms", "aup-1",
                "--accepted-by", "Ada")
    secok = _keys(rt_binary, store, "add", "--org", "secok", "--scope", "security", "--accept-terms", "aup-1",
                  "--accepted-by", "Grace")
    _keys(rt_binary, store, "set", "--org", "secok", "--security-disk-cache", "on")
    assert "organisation 'secok' lets its security keys use it" in _keys(rt_binary, store, "list")
    cache = tmp_path / "cache"

    def ask(base: str, key: str, security: bool, who: str) -> int:
        """One greedy chat request of `who`'s own long prompt; returns its cached tokens."""
        c = openai_client(base + ("/security" if security else ""), api_key=key)  # it adds /v1
        c = c.chat.completions.create(model="m", max_tokens=4, temperature=0, messages=[
            {"role": "user", "content": f"Organisation {who}. The secret word is {CANARY}. {FILLER} {FILLER}"}])
        return c.usage.prompt_tokens_details.cached_tokens

    def serve():
        return _start(rt_binary, package, n_ctx, Path(tempfile.mkdtemp(dir=tmp_path)), "--cache-dir", str(cache),
                      "--key-store", str(store))

    proc, base = serve()
    try:
        assert ask(base, acme, False, "acme") == 0
        assert ask(base, sec, True, "sec") == 0
        assert ask(base, secok, True, "secok") == 0
        # The security key's request through the Anthropic wire format too.
        an = anthropic.Anthropic(base_url=base + "/security", api_key=sec, max_retries=0)
        an.messages.create(model="m", max_tokens=4, messages=[
            {"role": "user", "content": f"Organisation sec. The secret word is {CANARY}. {FILLER} {FILLER} {FILLER}"}])
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    dirs = _tenant_dirs(cache)
    # The default tenant's folder (opened at start, unused here), acme's and secok's; none for sec.
    assert len(dirs) == 3, dirs
    assert sorted(n > 0 for n in dirs.values()) == [False, True, True], dirs
    key_file = Path(str(cache) + ".key")
    assert key_file.stat().st_size == 32 and (key_file.stat().st_mode & 0o777) == 0o600
    assert not any(key_file.read_bytes() in f.read_bytes() for f in cache.rglob("*") if f.is_file())

    # After a restart only the disk tier remains: acme and secok read their own blocks back,
    # sec has nothing there.
    proc, base = serve()
    try:
        assert ask(base, acme, False, "acme") >= 64
        assert ask(base, secok, True, "secok") >= 64
        assert ask(base, sec, True, "sec") == 0
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    assert _tenant_dirs(cache).keys() == dirs.keys()
