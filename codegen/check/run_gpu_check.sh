#!/usr/bin/env bash
# Numeric check of the generated PTX kernels against a float64 reference on a GPU.
#
#   codegen/check/run_gpu_check.sh gen <build-dir>   # here: PTX for sm_80 and sm_90
#   codegen/check/run_gpu_check.sh run <build-dir>   # on the GPU machine
#
# `gen` needs swizzle-opt (MLIR); `run` needs only swz-ptx-check, the PTX files
# under <build-dir>/gpu-check/ and a CUDA driver. `run` picks the PTX matching
# the GPU's compute capability (sm_90 for H100/H200, else sm_80).
set -euo pipefail
mode=${1:?usage: $0 gen|run <build-dir>}
build=${2:?usage: $0 gen|run <build-dir>}
src=$(cd "$(dirname "$0")/../.." && pwd)
out=$build/gpu-check
case $mode in
gen)
  # libdevice for math.* (see codegen/kernels/rms_norm_f32.mlir).
  export CUDA_ROOT=${CUDA_ROOT:-/usr/local/cuda}
  for chip in sm_80 sm_90; do
    mkdir -p "$out/$chip"
    "$build/compiler/mlir/swizzle-opt" "$src/codegen/kernels/gemm_f16_mma_sync.mlir" \
      -swz-materialize-swizzle \
      -gpu-lower-to-nvvm-pipeline="cubin-chip=$chip cubin-format=isa" \
      -swz-extract-kernels=output-dir="$out/$chip" -o /dev/null
    for k in rms_norm_f32 add_f32 rope_f32 swiglu_f32; do
      "$build/compiler/mlir/swizzle-opt" "$src/codegen/kernels/$k.mlir" \
        -gpu-lower-to-nvvm-pipeline="cubin-chip=$chip cubin-format=isa" \
        -swz-extract-kernels=output-dir="$out/$chip" -o /dev/null
    done
  done
  ls -l "$out"/*/ ;;
run)
  chip=sm_80
  if command -v nvidia-smi >/dev/null &&
     nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | grep -q '^9'; then
    chip=sm_90
  fi
  echo "using $chip PTX"
  "$build/codegen/swz-ptx-check" --gemm "$out/$chip/swz_kernels.ptx" \
    --rms-norm "$out/$chip/swz_rms_norm.ptx" --add "$out/$chip/swz_add.ptx" \
    --rope "$out/$chip/swz_rope.ptx" --swiglu "$out/$chip/swz_swiglu.ptx" ;;
*) echo "usage: $0 gen|run <build-dir>" >&2; exit 2 ;;
esac
