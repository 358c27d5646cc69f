"""Fixtures that start real `swizzle-rt serve` processes (and the fake-engine test server)
and wait for their "listening on http://HOST:PORT" line.

Environment:
  SWZ_RT          swizzle-rt binary (default: build/server/swizzle-rt)
  SWZ_PACKAGE     a compiled package (.swz); if unset, one is compiled into a temp dir with
  SWZ_SWIZZLEC    swizzlec (default: build/compiler/swizzlec, then build/bin/swizzlec)
                  from SWZ_GGUF (default: the SmolLM2-135M-Instruct Q4_1 GGUF of the venv)
  SWZ_CTX         context size for the served model (default 2048)
  SWZ_FAKE_SERVE  the fake-engine server (default: build/test/unit/server/swz_fake_serve)
  SWZ_QWEN_GGUF   Qwen2.5-Coder-0.5B-Instruct GGUF (scripts/fetch-qwen.sh), compiled with
                  SWZ_SWIZZLEC for the `qwen_server` fixture (tool calls, agents)
  SWZ_REQUIRE     "1": a missing binary/package fails the tests instead of skipping them
"""
from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LISTEN_RE = re.compile(r"listening on (http://[^\s:]+:(\d+))")
sys.path.insert(0, str(ROOT / "test" / "parity"))
import models  # noqa: E402  (test/parity/models.py: where the default model is installed)


def _installed_default_gguf() -> list[str]:
    try:
        return [models.default_gguf()]
    except RuntimeError:
        return []


DEFAULT_GGUFS = _installed_default_gguf()


def _missing(what: str):
    if os.environ.get("SWZ_REQUIRE") == "1":
        pytest.fail(f"{what} (SWZ_REQUIRE=1)")
    pytest.skip(what)


@pytest.fixture(scope="session")
def sarif_validator():
    """A jsonschema validator of the official SARIF 2.1.0 schema (test/python/sarif_schema.py:
    fetched from a pinned PyPI wheel, cached)."""
    import sarif_schema
    try:
        return sarif_schema.sarif_validator()
    except sarif_schema.Unavailable as e:
        _missing(str(e))


def _first_existing(env: str, candidates: list[Path]) -> Path | None:
    if os.environ.get(env):
        p = Path(os.environ[env])
        return p if p.exists() else None
    for c in candidates:
        if c.exists():
            return c
    return None


class ServerProcess:
    """A server subprocess; `base_url` is e.g. http://127.0.0.1:41234 (no /v1)."""

    def __init__(self, argv: list[str], startup_timeout: float = 180.0):
        self.argv = argv
        self.log_path = Path(tempfile.mkstemp(prefix="swz-server-", suffix=".log")[1])
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._log, text=True, bufsize=1)
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._drain, daemon=True).start()
        deadline = time.monotonic() + startup_timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise RuntimeError(f"no 'listening' line within {startup_timeout}s from {argv}\n{self.log()}")
            try:
                line = self._lines.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            if line is None:
                self.proc.wait()
                raise RuntimeError(f"{argv} exited with {self.proc.returncode} before listening\n{self.log()}")
            m = LISTEN_RE.search(line)
            if m:
                self.base_url = m.group(1)
                self.port = int(m.group(2))
                break

    def _drain(self):
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, needle: str, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.log():
                return True
            time.sleep(0.05)
        return False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGINT, timeout: float = 30.0) -> int:
        """Sends `sig` and waits for the exit; returns the exit status."""
        if self.alive():
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()
        return self.proc.returncode

    def kill(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="session")
def rt_binary() -> Path:
    p = _first_existing("SWZ_RT", [ROOT / "build/server/swizzle-rt"])
    if p is None:
        _missing("swizzle-rt not built (set SWZ_RT or build target swizzle-rt; needs swz_engine)")
    return p


@pytest.fixture(scope="session")
def package(tmp_path_factory) -> Path:
    if os.environ.get("SWZ_PACKAGE"):
        p = Path(os.environ["SWZ_PACKAGE"])
        if not p.exists():
            pytest.fail(f"SWZ_PACKAGE={p} does not exist")
        return p
    swizzlec = _first_existing("SWZ_SWIZZLEC", [ROOT / "build/compiler/swizzlec", ROOT / "build/bin/swizzlec"])
    swizzlec = swizzlec or (Path(shutil.which("swizzlec")) if shutil.which("swizzlec") else None)
    if swizzlec is None:
        _missing("no package: set SWZ_PACKAGE, or build swizzlec (SWZ_SWIZZLEC)")
    gguf = _first_existing("SWZ_GGUF", [Path(p) for p in DEFAULT_GGUFS])
    if gguf is None:
        _missing("no GGUF to compile (set SWZ_GGUF)")
    out = tmp_path_factory.mktemp("pkg") / "model.swz"
    r = subprocess.run([str(swizzlec), "compile", str(gguf), "--target", "cpu", "-o", str(out)],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.fail(f"swizzlec compile failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return out


@pytest.fixture(scope="session")
def n_ctx() -> int:
    return int(os.environ.get("SWZ_CTX", "2048"))


def start_rt(rt_binary: Path, package: Path, n_ctx: int, *extra: str) -> ServerProcess:
    return ServerProcess([str(rt_binary), "serve", str(package), "--host", "127.0.0.1", "--port", "0",
                          "-c", str(n_ctx), *extra])


@pytest.fixture(scope="session")
def server(rt_binary, package, n_ctx):
    s = start_rt(rt_binary, package, n_ctx)
    yield s
    rc = s.stop()
    assert rc == 0, f"swizzle-rt serve did not exit cleanly on SIGINT (status {rc})\n{s.log()}"


@pytest.fixture(scope="session")
def qwen_server(rt_binary, tmp_path_factory):
    """`swizzle-rt serve` on Qwen2.5-Coder-0.5B-Instruct (native <tool_call> template), -c 8192."""
    gguf = os.environ.get("SWZ_QWEN_GGUF")
    if not gguf or not Path(gguf).exists():
        _missing("SWZ_QWEN_GGUF not set or missing (scripts/fetch-qwen.sh)")
    swizzlec = _first_existing("SWZ_SWIZZLEC", [ROOT / "build/compiler/swizzlec", ROOT / "build/bin/swizzlec"])
    if swizzlec is None:
        _missing("swizzlec not built (SWZ_SWIZZLEC)")
    pkg = tmp_path_factory.mktemp("qwen") / "qwen.swz"
    r = subprocess.run([str(swizzlec), "compile", gguf, "--target", "cpu", "-o", str(pkg)],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.fail(f"swizzlec compile {gguf} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    s = start_rt(rt_binary, pkg, 8192)
    yield s
    rc = s.stop()
    assert rc == 0, f"swizzle-rt serve (qwen) did not exit cleanly (status {rc})\n{s.log()}"


@pytest.fixture(scope="session")
def fake_server():
    binary = _first_existing("SWZ_FAKE_SERVE", [ROOT / "build/test/unit/server/swz_fake_serve"])
    if binary is None:
        _missing("swz_fake_serve not built (cmake --build build --target swz_fake_serve)")
    s = ServerProcess([str(binary), "0", "64"])  # port 0, n_ctx 64
    yield s
    rc = s.stop()
    assert rc == 0, f"swz_fake_serve did not exit cleanly on SIGINT (status {rc})\n{s.log()}"


def wait_for(pred, timeout: float, step: float = 0.02) -> bool:
    """Polls `pred` every `step` seconds until it is true or `timeout` seconds pass; its
    last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


def scrape_metrics(base_url: str) -> dict:
    """GET /metrics (Prometheus text format 0.0.4) parsed with prometheus_client:
    {(sample name, sorted label pairs): value}."""
    import requests
    from prometheus_client.parser import text_string_to_metric_families

    r = requests.get(base_url + "/metrics", timeout=30)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    out = {}
    for fam in text_string_to_metric_families(r.text):
        for smp in fam.samples:
            out[(smp.name, tuple(sorted(smp.labels.items())))] = smp.value
    return out


def metric(m: dict, name: str, **labels) -> float:
    """One sample of a scrape_metrics() result (0 when absent)."""
    return m.get((name, tuple(sorted(labels.items()))), 0.0)


def openai_client(base_url: str, api_key: str = "unused", **kw):
    import openai

    return openai.OpenAI(base_url=base_url + "/v1", api_key=api_key, max_retries=0, timeout=120, **kw)


@pytest.fixture(scope="session")
def client(server):
    return openai_client(server.base_url)


@pytest.fixture(scope="session")
def fake_client(fake_server):
    return openai_client(fake_server.base_url)
