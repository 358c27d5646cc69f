#!/usr/bin/env bash
# Compiles the embedded default model (SmolLM2-135M-Instruct Q4_1) into build/models/smollm2.swz
# (skipped when the package is newer than the compiler). Prints the package path.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${SWZ_BUILD_DIR:-build}
MODEL=$(./scripts/default-model-path.sh)
PKG=$BUILD/models/smollm2.swz
mkdir -p "$BUILD/models"
if [ ! -f "$PKG/manifest.json" ] || [ "$BUILD/compiler/swizzlec" -nt "$PKG/manifest.json" ]; then
  "$BUILD/compiler/swizzlec" compile "$MODEL" --target cpu -o "$PKG" >&2
fi
echo "$PKG"
