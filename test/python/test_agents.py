"""Real coding agents against `swizzle-rt serve` with a real model (the agent tier).

The agents live in their own venv, .venv-agents (scripts/setup-agents.sh, which
scripts/test-all.sh runs first): Claude Code is the CLI bundled in the
`claude-agent-sdk` wheel from PyPI; mini-swe-agent speaks OpenAI's chat wire format.
Pass means the client finishes its protocol without a client-side error; answer
quality is not judged with these small models. Each test checks the server's request
log too, so a client that silently never reached the server cannot pass.

Environment: as conftest.py, plus SWZ_AGENTS_VENV (default .venv-agents) and
SWZ_QWEN_GGUF (Qwen2.5-Coder-0.5B-Instruct, for the tool round trip: Claude Code's tool
schemas need more than SmolLM2's 135M parameters to get a call out).
"""
from __future__ import annotations

import glob
import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, _missing, start_rt

# Claude Code must never try the network: only the server under test.
CLAUDE_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    # No extended thinking: Claude Code otherwise sends thinking {"type": "enabled"},
    # which this server answers with a 400 (it has no thinking blocks to give).
    "MAX_THINKING_TOKENS": "0",
    # It asks for 32000 output tokens by default; a bound keeps a rambling turn short
    # (Claude Code treats reaching it as an error, so it is well above a normal turn).
    "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "1024",
    "ANTHROPIC_API_KEY": "sk-local-test",
}


def agents_venv() -> Path:
    v = Path(os.environ.get("SWZ_AGENTS_VENV", ROOT / ".venv-agents"))
    if not (v / "bin" / "python").exists():
        _missing(f"agent venv {v} missing (run scripts/setup-agents.sh)")
    return v


@pytest.fixture(scope="module")
def claude_bin() -> Path:
    hits = glob.glob(str(agents_venv() / "lib" / "python3*" / "site-packages" / "claude_agent_sdk" / "_bundled" / "claude"))
    if not hits:
        _missing("claude-agent-sdk in .venv-agents has no bundled claude binary")
    return Path(hits[0])


def run_claude(claude_bin: Path, base_url: str, workdir: Path, prompt: str, *args: str, timeout: float = 540):
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "ANTHROPIC_BASE_URL": base_url,
           **CLAUDE_ENV}
    cmd = [str(claude_bin), "-p", prompt, "--bare", "--output-format", "json", "--model", "claude-sonnet-4-5", *args]
    r = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)
    print("$", " ".join(cmd))
    print(r.stdout[-3000:], r.stderr[-2000:])
    return r


def result_json(r, max_turns_ok: bool = False) -> dict:
    """The final JSON result; exit 0, or exit 1 with subtype error_max_turns when
    max_turns_ok (the session ran its turns to the limit: a completed protocol)."""
    assert r.stdout.strip(), f"claude printed nothing (exit {r.returncode})\n{r.stderr}"
    res = json.loads(r.stdout.strip().splitlines()[-1])
    ok = r.returncode == 0 or (max_turns_ok and r.returncode == 1 and res.get("subtype") == "error_max_turns")
    assert ok, f"claude exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert res.get("api_error_status") is None, res
    return res


def test_claude_code_headless_answers(claude_bin, qwen_server, tmp_path):
    """Qwen2.5 (SmolLM2 tends to talk until max_tokens, which Claude Code counts as an error)."""
    server = qwen_server
    before = server.log().count("POST /v1/messages 200")
    r = run_claude(claude_bin, server.base_url, tmp_path, "Say hello.",
                   "--system-prompt", "You are a terse assistant.", "--tools", "", "--max-turns", "1")
    res = result_json(r)
    assert res["type"] == "result" and res["subtype"] == "success" and res["is_error"] is False
    assert isinstance(res["result"], str)
    assert res["usage"]["output_tokens"] > 0
    assert server.log().count("POST /v1/messages 200") > before


def test_claude_code_tool_use_round_trip(claude_bin, qwen_server, tmp_path):
    """Claude Code offers its Read tool; the model's call comes back as tool_use, Claude
    Code runs it and sends the tool_result, and the turn after it finishes the session."""
    (tmp_path / "notes.txt").write_text("The secret word is pineapple.\n")
    res = None
    for attempt in range(2):  # Claude Code samples at temperature 1: a 0.5B model may answer without a call
        mark = len(qwen_server.log())
        r = run_claude(claude_bin, qwen_server.base_url, tmp_path,
                       "Use the Read tool to read notes.txt in the current directory, then tell me the secret word.",
                       "--system-prompt", "You are a coding agent. Use tools when asked.",
                       "--tools", "Read", "--allowedTools", "Read", "--max-turns", "2")
        res = result_json(r, max_turns_ok=True)
        log = qwen_server.log()[mark:]
        if "stop=tool_use" in log:
            break
    print(log)
    assert "stop=tool_use" in log, "the model never called a tool in two sessions"
    assert res["subtype"] in ("success", "error_max_turns") and res["num_turns"] >= 2
    # Every request after the first reused the cached prefix of the one before.
    cached = [int(x.split("=")[1]) for x in log.split() if x.startswith("cached=")]
    assert len(cached) >= 2 and all(c > 0 for c in cached[1:])


def test_mini_swe_agent_runs_a_task_in_a_scratch_repo(server, tmp_path):
    """mini-swe-agent (OpenAI chat wire through litellm), its text-based config (bash
    actions in fenced blocks, the mode that suits small models), two steps on a one-file
    repo. Its protocol: a chat request per step, the observation or a format-error
    message appended, exit with a status and a trajectory file."""
    mini = agents_venv() / "bin" / "mini"
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    traj = tmp_path / "traj.json"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
           "MSWEA_CONFIGURED": "true", "MSWEA_GLOBAL_CONFIG_DIR": str(tmp_path / "cfg"),
           "MSWEA_COST_TRACKING": "ignore_errors", "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "1",
           "OPENAI_API_KEY": "sk-local-test", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    cmd = [str(mini), "-m", "openai/smollm2", "-t", "In calc.py, add() subtracts. Make it add.", "-y",
           "--exit-immediately", "-c", "mini_textbased.yaml",
           "-c", f"model.model_kwargs.api_base={server.base_url}/v1",
           "-c", "model.model_kwargs.temperature=0", "-c", "model.model_kwargs.max_tokens=64",
           "-c", "agent.step_limit=2", "-o", str(traj)]
    mark = len(server.log())
    r = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=540,
                       stdin=subprocess.DEVNULL)
    print("$", " ".join(cmd))
    print(r.stdout[-3000:], r.stderr[-2000:])
    assert r.returncode == 0
    info = json.loads(traj.read_text())["info"]
    # Finished by its own rules (step limit or a submission), not by an exception.
    assert info["exit_status"] in ("LimitsExceeded", "Submitted"), info
    log = server.log()[mark:]
    assert log.count("POST /v1/chat/completions 200") >= 2
    assert "POST /v1/chat/completions 4" not in log and "POST /v1/chat/completions 5" not in log
