#!/usr/bin/env bash
# The main job: set up, compile the default model, serve it, ask it one question through
# the official OpenAI SDK, print the answer, then keep serving until Ctrl-C.
#   --once        stop after that request (for scripts)
#   --port N      port to listen on (default 8080)
#   --prompt TEXT the question
set -euo pipefail
cd "$(dirname "$0")/.."
ONCE=0; PORT=${PORT:-8080}; PROMPT="Write a Python function that reverses a string."
while [ $# -gt 0 ]; do
  case "$1" in
    --once) ONCE=1 ;;
    --port) PORT=$2; shift ;;
    --prompt) PROMPT=$2; shift ;;
    *) echo "unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  shift
done
./scripts/setup.sh
BUILD=${SWZ_BUILD_DIR:-build}
PKG=$(./scripts/compile-default.sh)
LOG=$(mktemp)
"$BUILD/server/swizzle-rt" serve "$PKG" --host 127.0.0.1 --port "$PORT" -c 4096 >"$LOG" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true; rm -f "$LOG"' EXIT
for _ in $(seq 1 300); do
  grep -q "listening on" "$LOG" && break
  kill -0 $SERVER 2>/dev/null || { cat "$LOG" >&2; exit 1; }
  sleep 0.1
done
grep -q "listening on" "$LOG" || { cat "$LOG" >&2; echo "server did not start" >&2; exit 1; }
cat "$LOG"
.venv/bin/python scripts/ask.py --base-url "http://127.0.0.1:$PORT/v1" "$PROMPT"
if [ "$ONCE" = 1 ]; then exit 0; fi
echo "serving on http://127.0.0.1:$PORT/v1 (OpenAI wire format); Ctrl-C to stop"
tail -n +1 -f "$LOG" --pid=$SERVER
