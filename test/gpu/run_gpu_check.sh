#!/usr/bin/env bash
# Numeric check and timing of every generated PTX kernel on an NVIDIA GPU against
# its float64 reference (the cases of test/gpu/cases*.cpp).
#
#   test/gpu/run_gpu_check.sh gen <build-dir>            # here: PTX for sm_80 and sm_90
#   test/gpu/run_gpu_check.sh run <build-dir> [args...]  # on the GPU machine
#
# `gen` compiles every kernel listed in SWZ_KERNELS (codegen/CMakeLists.txt) with
# swizzle-opt, the same passes as swizzlec (swz-apply-schedule and swz-lower-tiles for
# tile specs, swz-materialize-swizzle, then gpu-lower-to-nvvm-pipeline), to <build-dir>/gpu-check/<chip>/<module>.ptx and
# checks each with ptxas when it is installed. `run` needs only swz-ptx-check (built
# with g++ into gpu-check/ when <build-dir> has none: nlohmann-json3-dev, cuda.h),
# those files and a CUDA driver; it picks the PTX matching the GPU (sm_90 for
# H100/H200, else sm_80), prints one line per case (error, time, GB/s, roofline
# fraction) and writes <build-dir>/gpu-check/ptx_check.json. Extra args go to
# swz-ptx-check (e.g. --filter rms_norm, --peak-gbps 4800).
set -euo pipefail
mode=${1:?usage: $0 gen|run <build-dir> [swz-ptx-check args]}
build=${2:?usage: $0 gen|run <build-dir> [swz-ptx-check args]}
shift 2
src=$(cd "$(dirname "$0")/../.." && pwd)
out=$build/gpu-check
case $mode in
gen)
  # libdevice for math.* (see codegen/kernels/rms_norm_f32.mlir).
  export CUDA_ROOT=${CUDA_ROOT:-/usr/local/cuda}
  kernels=$(tr '\n' ' ' < "$src/codegen/CMakeLists.txt" |
            grep -o 'set(SWZ_KERNELS[^)]*)' | sed 's/set(SWZ_KERNELS//; s/)//')
  [ -n "${kernels// /}" ] || { echo "no SWZ_KERNELS list in codegen/CMakeLists.txt" >&2; exit 2; }
  ptxas=$(command -v ptxas || echo "$CUDA_ROOT/bin/ptxas")
  for chip in sm_80 sm_90; do
    rm -rf "${out:?}/$chip" && mkdir -p "$out/$chip"
    # The PTX's own target: the schedule's device.arch (sm_90.json: sm_90a, for wgmma).
    arch=$(sed -n 's/.*"arch": *"\(sm_[0-9]*a\{0,1\}\)".*/\1/p' "$src/compiler/schedules/$chip.json" | head -1)
    for k in $kernels; do
      # A source for one target only says so on its gpu.module (swz.targets = "spirv").
      grep -q 'swz.targets = "spirv"' "$src/codegen/kernels/$k.mlir" && continue
      # Tile specs (gemm_f16.mlir) become kernels by the chip's schedule, as in swizzlec.
      if ! "$build/compiler/tools/swizzle-opt" "$src/codegen/kernels/$k.mlir" \
          -swz-apply-schedule=schedule="$src/compiler/schedules/$chip.json" -swz-lower-tiles -swz-materialize-swizzle -swz-dynamic-smem \
          -gpu-lower-to-nvvm-pipeline="cubin-chip=${arch:-$chip} cubin-format=isa" \
          -swz-extract-kernels=output-dir="$out/$chip" -o /dev/null 2> "$out/$chip/$k.log"; then
        cat "$out/$chip/$k.log" >&2; echo "error: $k for $chip failed" >&2; exit 1
      fi
      rm -f "$out/$chip/$k.log"
    done
    if [ -x "$ptxas" ]; then
      for f in "$out/$chip"/*.ptx; do
        "$ptxas" -arch="${arch:-$chip}" "$f" -o /dev/null || { echo "error: ptxas rejects $f" >&2; exit 1; }
      done
    fi
  done
  ls -l "$out"/*/ ;;
run)
  chip=sm_80
  if command -v nvidia-smi >/dev/null &&
     nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | grep -q '^9'; then
    chip=sm_90
  fi
  echo "using $chip PTX"
  runner=$build/test/gpu/swz-ptx-check
  if [ ! -x "$runner" ]; then
    # No CMake build here (e.g. only gpu-check/ was copied): build the runner alone. It
    # needs g++, nlohmann-json3-dev, cuda.h and libcuda; no MLIR.
    runner=$out/swz-ptx-check
    cuda=${CUDA_ROOT:-/usr/local/cuda}
    g++ -std=c++20 -O2 -I"$cuda/include" "$src"/test/gpu/ptx_check.cpp \
      "$src"/test/gpu/cases*.cpp -o "$runner" -L"$cuda/lib64/stubs" -lcuda
  fi
  "$runner" --ptx-dir "$out/$chip" --json "$out/ptx_check.json" "$@" ;;
*) echo "usage: $0 gen|run <build-dir> [swz-ptx-check args]" >&2; exit 2 ;;
esac
