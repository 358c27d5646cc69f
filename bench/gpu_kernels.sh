#!/usr/bin/env bash
# Every generated PTX kernel on an NVIDIA GPU (the lent H200): numeric check against
# the float64 reference of its cases (test/gpu/cases_*.cpp) and timing beside
# the roofline (bytes moved over measured copy bandwidth, FLOPs over measured peak).
#
#   bench/gpu_kernels.sh prepare [build-dir]   # here: PTX for sm_80/sm_90 + the runner
#   bench/gpu_kernels.sh run [build-dir]       # on the GPU machine (no MLIR needed)
#
# `run` writes $OUT/ptx_check.json (or <build-dir>/gpu-check/ when $OUT is unset) and
# prints one line per case. With the device tool, carry <build-dir>/gpu-check and
# <build-dir>/test/gpu/swz-ptx-check (built here; it needs only libcuda at run time).
set -euo pipefail
mode=${1:?usage: $0 prepare|run [build-dir]}
build=${2:-build}
src=$(cd "$(dirname "$0")/.." && pwd)
case $mode in
prepare)
  cmake --build "$build" --target swizzle-opt swz-ptx-check
  "$src/test/gpu/run_gpu_check.sh" gen "$build" ;;
run)
  out=${OUT:-$build/gpu-check}
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv || true
  rc=0
  "$src/test/gpu/run_gpu_check.sh" run "$build" "${@:3}" > "$out/ptx_check.log" 2>&1 || rc=$?
  cp -f "$build/gpu-check/ptx_check.json" "$out/" 2>/dev/null || true
  cat "$out/ptx_check.log"
  exit $rc ;;
*) echo "usage: $0 prepare|run [build-dir]" >&2; exit 2 ;;
esac
