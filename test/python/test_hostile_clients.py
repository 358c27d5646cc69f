"""Requests a hostile client sends (issue 14, "Found when tried as a hostile client would"),
against the fake-engine server and, where the engine matters, the real `swizzle-rt serve`:
each gets a precise 4xx in its API's error schema, and the server keeps serving.
"""
from __future__ import annotations

import json
import socket
import time

import pytest
import requests

OPENAI_PATHS = ["/v1/chat/completions", "/v1/completions"]
ANTHROPIC_PATHS = ["/v1/messages", "/v1/messages/count_tokens"]


def check_openai_error(body: dict, needle: str):
    assert set(body) == {"error"}, body
    err = body["error"]
    assert err["type"] == "invalid_request_error", err
    assert set(err) == {"message", "type", "param", "code"}, err
    assert needle in err["message"], err


def check_anthropic_error(body: dict, needle: str):
    assert body["type"] == "error", body
    assert body["error"]["type"] == "invalid_request_error", body
    assert needle in body["error"]["message"], body


def check_error(path: str, body: dict, needle: str):
    (check_anthropic_error if path.startswith("/v1/messages") else check_openai_error)(body, needle)


def assert_healthy(base_url: str):
    r = requests.get(base_url + "/health", timeout=10)
    assert r.status_code == 200 and r.json()["status"] == "ok"


# --- Content-Length --------------------------------------------------------------------


def raw_exchange(port: int, head: bytes, body: bytes, timeout: float = 10.0) -> tuple[bytes, float | None]:
    """Sends one raw request; returns what came back and the seconds until the server
    closed the connection (None: still open after `timeout`)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    t0 = time.monotonic()
    s.sendall(head + body)
    data, closed_after = b"", None
    try:
        while True:
            d = s.recv(65536)
            if not d:
                closed_after = time.monotonic() - t0
                break
            data += d
    except socket.timeout:
        pass
    finally:
        s.close()
    return data, closed_after


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
@pytest.mark.parametrize("length", ["-1", "-46", "+46", "46x", "0x2e", "1" * 25])
def test_invalid_content_length_is_400_and_closes_the_connection(fake_server, path, length):
    body = b'{"messages":[{"role":"user","content":"hi"}]}'
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()
    data, closed_after = raw_exchange(fake_server.port, head, body)
    status_line, _, rest = data.partition(b"\r\n")
    assert status_line == b"HTTP/1.1 400 Bad Request", data[:300]
    headers, _, payload = rest.partition(b"\r\n\r\n")
    assert b"Connection: close" in headers
    check_error(path, json.loads(payload), f"Invalid Content-Length header '{length}'")
    # Answered at once (not after waiting for a body of 2^64 - 1 bytes), and nothing after
    # the headers was read as another request: the connection is closed.
    assert closed_after is not None and closed_after < 3.0, closed_after
    assert data.count(b"HTTP/1.1 ") == 1
    assert_healthy(fake_server.base_url)


def test_conflicting_content_lengths_are_400(fake_server):
    body = b'{"messages":[{"role":"user","content":"hi"}]}'
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 46\r\nContent-Length: 4\r\n\r\n")
    data, closed_after = raw_exchange(fake_server.port, head, body)
    assert data.startswith(b"HTTP/1.1 400 "), data[:300]
    assert b"Conflicting Content-Length headers" in data
    assert closed_after is not None
    assert_healthy(fake_server.base_url)


def test_valid_content_length_still_served(fake_server):
    body = b'{"messages":[{"role":"user","content":"hi"}]}'
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Connection: close\r\nContent-Length:  {len(body)} \r\n\r\n").encode()
    data, _ = raw_exchange(fake_server.port, head, body)
    assert data.startswith(b"HTTP/1.1 200 OK"), data[:300]
