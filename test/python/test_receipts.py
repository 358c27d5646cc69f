"""Execution receipts with a real `swizzle-rt serve --receipts` process on the default model
(docs/receipts.md): every endpoint, streamed or not, answers with a receipt that
`swizzle-rt verify-receipt` accepts and that an independent Python verifier (PyNaCl's
Ed25519, the `blake3` package, json.dumps as the canonical form) accepts too; tampering
with a receipt field, the request or the response is caught and the field named; a greedy
re-run of the same request has the same output hash.
"""
from __future__ import annotations

import base64
import json
import os
import re
import stat
import subprocess
from pathlib import Path

import blake3
import nacl.signing as nacl_signing
import pytest
import requests

from conftest import ServerProcess, openai_client, start_rt  # noqa: E402

MSGS = [{"role": "user", "content": "Name three colours of the rainbow."}]


def b64(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def canon(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@pytest.fixture(scope="module")
def keys(rt_binary, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("receipt-keys")
    r = subprocess.run([str(rt_binary), "keygen", str(d / "k")], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return d / "k"


@pytest.fixture(scope="module")
def rserver(rt_binary, package, n_ctx, keys):
    s = start_rt(rt_binary, package, n_ctx, "--receipts", str(keys))
    yield s
    assert s.stop() == 0, s.log()


def post(server: ServerProcess, path: str, body: dict) -> tuple[bytes, requests.Response]:
    raw = json.dumps(body).encode()
    r = requests.post(server.base_url + path, data=raw, headers={"Content-Type": "application/json"}, timeout=300)
    assert r.status_code == 200, r.text
    return raw, r


def carrier_of(response: bytes) -> tuple[bytes, dict]:
    """(bytes before the carrying event, the carrying object) of a saved response."""
    text = response.decode()
    if text.lstrip().startswith("{"):
        return b"", json.loads(text)
    pos = 0
    for event in text.split("\n\n"):
        for line in event.split("\n"):
            if line.startswith("data: ") and "swizzle_receipt" in line:
                obj = json.loads(line[6:])
                if "swizzle_receipt" in obj:
                    return text[:pos].encode(), obj
        pos += len(event) + 2
    raise AssertionError("no event carries swizzle_receipt")


def independent_verify(receipt: str, pubkey_hex: str, request: bytes, response: bytes, package: Path) -> dict:
    """docs/receipts.md with nothing of Swizzle: returns the payload or raises."""
    prefix, p64, s64 = receipt.split(".")
    assert prefix == "swzr1"
    payload = b64(p64)
    nacl_signing.VerifyKey(bytes.fromhex(pubkey_hex)).verify(payload, b64(s64))
    p = json.loads(payload)
    assert payload == canon(p), "the payload is in canonical form"
    assert p["format"] == "swizzle-receipt/1"
    assert p["key_id"] == blake3.blake3(bytes.fromhex(pubkey_hex)).hexdigest()[:16]
    assert p["request_blake3"] == blake3.blake3(canon(json.loads(request))).hexdigest()
    before, obj = carrier_of(response)
    assert obj.pop("swizzle_receipt") == receipt
    assert p["response_blake3"] == blake3.blake3(before + canon(obj)).hexdigest()
    manifest = (package / "manifest.json").read_bytes()
    assert p["manifest_blake3"] == blake3.blake3(manifest).hexdigest()
    ch = json.loads(manifest)["source_gguf"]["content_hash"]
    assert p["gguf_content_hash"] == f"{ch['algorithm']}:{ch['digest']}"
    assert p["uncached_tokens"] == p["prompt_tokens"] - p["cached_tokens"]
    return p


def verify_cli(rt_binary, tmp_path, receipt: str, keys: Path, request: bytes | None, response: bytes | None,
               package: Path | None = None) -> subprocess.CompletedProcess:
    args = [str(rt_binary), "verify-receipt", "-", "--pubkey", str(keys) + ".pub"]
    if request is not None:
        (tmp_path / "req.json").write_bytes(request)
        args += ["--request", str(tmp_path / "req.json")]
    if response is not None:
        (tmp_path / "resp").write_bytes(response)
        args += ["--response", str(tmp_path / "resp")]
    if package is not None:
        args += ["--package", str(package)]
    return subprocess.run(args, input=receipt, capture_output=True, text=True, timeout=60)


def usage_counts(path: str, stream: bool, response: bytes) -> tuple[int, int, int] | None:
    """(prompt, cached, output) tokens as the response's usage reports them (None: an
    OpenAI stream without include_usage reports none)."""
    if not stream:
        u = json.loads(response)["usage"]
    else:
        u = None
        for line in response.decode().split("\n"):
            if line.startswith("data: {"):
                ev = json.loads(line[6:])
                if path == "/v1/messages":
                    if ev.get("type") == "message_start":
                        u = dict(ev["message"]["usage"])
                    elif ev.get("type") == "message_delta":
                        u["output_tokens"] = ev["usage"]["output_tokens"]
                elif ev.get("usage"):
                    u = ev["usage"]
    if u is None:
        return None
    if path == "/v1/messages":
        cached = u["cache_read_input_tokens"]
        return u["input_tokens"] + cached + u["cache_creation_input_tokens"], cached, u["output_tokens"]
    return u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"], u["completion_tokens"]


CASES = [
    ("/v1/chat/completions", {"messages": MSGS, "max_tokens": 12, "temperature": 0.7, "seed": 11}),
    ("/v1/chat/completions", {"messages": MSGS, "max_tokens": 8, "n": 2, "temperature": 0, "top_p": 0.9,
                              "stream_options": {"include_usage": True}}),
    ("/v1/completions", {"prompt": "The capital of France is", "max_tokens": 8, "temperature": 0}),
    ("/v1/messages", {"model": "m", "messages": MSGS, "max_tokens": 10, "temperature": 0.5, "top_k": 20}),
]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("path,body", CASES, ids=["chat", "chat-n2", "completions", "messages"])
def test_every_endpoint_answers_with_a_receipt_that_verifies(rserver, rt_binary, keys, package, tmp_path, path, body,
                                                             stream):
    body = dict(body, stream=stream)
    if not stream:
        body.pop("stream_options", None)
    request, r = post(rserver, path, body)
    response = r.content
    before, obj = carrier_of(response)
    receipt = obj["swizzle_receipt"]
    if stream:
        assert "X-Swizzle-Receipt" not in r.headers
        rest = response[len(before):].decode().split("\n\n", 1)[1]
        assert rest in ("", "data: [DONE]\n\n"), "the carrier is the last JSON event"
    else:
        assert r.headers["X-Swizzle-Receipt"] == receipt

    pubkey = Path(str(keys) + ".pub").read_text().strip()
    p = independent_verify(receipt, pubkey, request, response, package)
    assert p["endpoint"] == path and p["stream"] is stream
    usage = usage_counts(path, stream, response)
    assert usage is not None or (stream and path != "/v1/messages" and "stream_options" not in body)
    if usage is not None:
        assert (p["prompt_tokens"], p["cached_tokens"], p["output_tokens"]) == usage
    assert p["output_tokens"] > 0
    s = p["sampling"]
    assert s["temperature"] == body["temperature"] and s["max_tokens"] == body["max_tokens"]
    assert s["n"] == body.get("n", 1) and s["seed"] == body.get("seed")
    assert s["top_k"] == body.get("top_k", 0) and s["top_p"] == body.get("top_p", 1.0)

    out = verify_cli(rt_binary, tmp_path, receipt, keys, request, response, package)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "FAIL" not in out.stdout and out.stdout.rstrip().endswith("receipt verified")
    for check in ("signature", "request_blake3", "response_blake3", "manifest_blake3", "gguf_content_hash"):
        assert re.search(rf"^ok   {check}", out.stdout, re.M), (check, out.stdout)


def forge(receipt: str, field: str, value) -> str:
    """The receipt with one payload field changed and its original signature kept."""
    prefix, p64, s64 = receipt.split(".")
    p = json.loads(b64(p64))
    if field.startswith("sampling."):
        p["sampling"][field[9:]] = value
    else:
        p[field] = value
    return ".".join([prefix, base64.urlsafe_b64encode(canon(p)).decode().rstrip("="), s64])


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_tampering_is_caught_and_named(rserver, rt_binary, keys, tmp_path, stream):
    body = {"messages": MSGS, "max_tokens": 8, "temperature": 0, "stream": stream}
    request, r = post(rserver, "/v1/chat/completions", body)
    response = r.content
    receipt = carrier_of(response)[1]["swizzle_receipt"]
    p = json.loads(b64(receipt.split(".")[1]))

    # Every field of the payload: the signature fails and the field is named (the response
    # carries the receipt as signed).
    fields = [k for k in p if k != "sampling"] + ["sampling." + k for k in p["sampling"]]
    assert len(fields) == 24
    for field in fields:
        old = p["sampling"][field[9:]] if field.startswith("sampling.") else p[field]
        new = (old + "0") if isinstance(old, str) else (not old) if isinstance(old, bool) else 4321
        out = verify_cli(rt_binary, tmp_path, forge(receipt, field, new), keys, request, response)
        assert out.returncode == 1, (field, out.stdout)
        assert "FAIL signature:" in out.stdout, (field, out.stdout)
        assert f"FAIL {field}:" in out.stdout, (field, out.stdout)
        assert out.stdout.rstrip().endswith("receipt NOT verified")

    # The request: one character of the prompt, or a sampling value.
    for changed, named in [(dict(body, messages=[{"role": "user", "content": "Name three colours of the rainbow!"}]),
                            ["request_blake3"]),
                           (dict(body, temperature=0.2), ["request_blake3", "sampling.temperature"]),
                           (dict(body, max_tokens=9), ["request_blake3", "sampling.max_tokens"])]:
        out = verify_cli(rt_binary, tmp_path, receipt, keys, json.dumps(changed).encode(), response)
        assert out.returncode == 1
        for n in named:
            assert f"FAIL {n}:" in out.stdout, (n, out.stdout)
        assert "FAIL signature" not in out.stdout
    # Whitespace and key order do not change the canonical request.
    same = json.dumps(dict(reversed(list(json.loads(request).items()))), indent=3).encode()
    assert verify_cli(rt_binary, tmp_path, receipt, keys, same, response).returncode == 0

    # The response: one byte of the answer's text, or the reported usage.
    if stream:  # one letter of the first content delta that starts with one (raw bytes)
        text = response.decode()
        m = re.search(r'"content":" ?([A-Za-z0-9])', text)
        assert m, text
        i = m.start(1)
        altered = (text[:i] + ("Q" if text[i] != "Q" else "R") + text[i + 1:]).encode()
    else:
        doc = json.loads(response)
        doc["choices"][0]["message"]["content"] += "!"
        altered = json.dumps(doc, indent=1).encode()  # other formatting alone would not matter
    out = verify_cli(rt_binary, tmp_path, receipt, keys, request, altered)
    assert out.returncode == 1 and "FAIL response_blake3:" in out.stdout, out.stdout
    if not stream:
        assert verify_cli(rt_binary, tmp_path, receipt, keys, request,
                          json.dumps(json.loads(response), indent=1).encode()).returncode == 0
        doc = json.loads(response)
        doc["usage"]["completion_tokens"] += 1
        out = verify_cli(rt_binary, tmp_path, receipt, keys, request, json.dumps(doc).encode())
        assert "FAIL response_blake3:" in out.stdout and "FAIL output_tokens:" in out.stdout, out.stdout

    # Another key.
    other = tmp_path / "other"
    subprocess.run([str(rt_binary), "keygen", str(other)], check=True, capture_output=True)
    out = subprocess.run([str(rt_binary), "verify-receipt", receipt, "--pubkey", str(other) + ".pub"], capture_output=True,
                         text=True)
    assert out.returncode == 1 and "FAIL signature:" in out.stdout and "FAIL key_id:" in out.stdout


def test_greedy_rerun_gives_the_same_output_hash(rserver):
    """Greedy decoding is deterministic: the same request again (now with a warm prefix
    cache, so other cached counts), streamed or not, yields the same token ids."""
    system = {"role": "system", "content": "You answer in one short sentence, plainly and without lists. " * 12}
    body = {"messages": [system] + MSGS, "max_tokens": 24, "temperature": 0}  # > 64 prompt tokens: one cacheable block
    payloads = []
    for stream in (False, False, True):
        _, r = post(rserver, "/v1/chat/completions", dict(body, stream=stream))
        receipt = carrier_of(r.content)[1]["swizzle_receipt"]
        payloads.append(json.loads(b64(receipt.split(".")[1])))
    a, b, c = payloads
    assert a["output_tokens"] > 0
    assert a["output_tokens_blake3"] == b["output_tokens_blake3"] == c["output_tokens_blake3"]
    assert a["request_blake3"] == b["request_blake3"] != c["request_blake3"]  # "stream" is part of the request
    assert b["cached_tokens"] > 0 and a["response_blake3"] != b["response_blake3"]  # ids, times, cached counts differ


def test_sdks_see_the_receipt(rserver):
    """The official SDKs keep the extra field: openai on the completion object, anthropic on the Message."""
    client = openai_client(rserver.base_url)
    raw = client.chat.completions.with_raw_response.create(model="m", messages=MSGS, max_tokens=4, temperature=0)
    completion = raw.parse()
    assert completion.model_extra["swizzle_receipt"] == raw.headers["x-swizzle-receipt"]
    import anthropic

    a = anthropic.Anthropic(base_url=rserver.base_url, api_key="unused", max_retries=0)
    msg = a.messages.create(model="m", max_tokens=4, messages=MSGS)
    assert msg.model_extra["swizzle_receipt"].startswith("swzr1.")
    with a.messages.stream(model="m", max_tokens=4, messages=MSGS) as s:
        text = "".join(s.text_stream)
    assert text


def test_keygen_files_and_refusals(rt_binary, tmp_path):
    k = tmp_path / "key"
    r = subprocess.run([str(rt_binary), "keygen", str(k)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(r"[0-9a-f]{64}\n", k.read_text()) and re.fullmatch(r"[0-9a-f]{64}\n", Path(str(k) + ".pub").read_text())
    assert stat.S_IMODE(os.stat(k).st_mode) == 0o600
    kid = blake3.blake3(bytes.fromhex(Path(str(k) + ".pub").read_text())).hexdigest()[:16]
    assert f"key id {kid}" in r.stdout
    seed = k.read_text()
    # The public key is the seed's (RFC 8032), as PyNaCl derives it.
    assert nacl_signing.SigningKey(bytes.fromhex(seed)).verify_key.encode().hex() == Path(str(k) + ".pub").read_text().strip()
    r = subprocess.run([str(rt_binary), "keygen", str(k)], capture_output=True, text=True)
    assert r.returncode == 1 and "--force" in r.stderr and k.read_text() == seed
    assert subprocess.run([str(rt_binary), "keygen", str(k), "--force"], capture_output=True).returncode == 0
    assert k.read_text() != seed


def test_serve_refuses_a_bad_key_before_loading(rt_binary, package, tmp_path):
    bad = tmp_path / "bad.key"
    bad.write_text("not a key\n")
    r = subprocess.run([str(rt_binary), "serve", str(package), "--port", "0", "--receipts", str(bad)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1
    assert str(bad) in r.stderr and "keygen" in r.stderr and "loaded" not in r.stderr
