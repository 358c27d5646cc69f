#!/usr/bin/env bash
# Builds .venv-agents (requirements-agents.txt): the coding agents of the agent test tier,
# Claude Code (the CLI bundled in claude-agent-sdk's platform wheel) and mini-swe-agent.
# Idempotent. Prints the venv path.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-agents
if [ ! -x "$VENV/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$VENV" >&2
  "$VENV/bin/pip" install -q --upgrade pip >&2
fi
if ! cmp -s requirements-agents.txt "$VENV/.requirements.stamp" 2>/dev/null; then
  "$VENV/bin/pip" install -q -r requirements-agents.txt >&2
  cp requirements-agents.txt "$VENV/.requirements.stamp"
fi
realpath "$VENV"
