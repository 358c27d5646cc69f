# Shared by bench/tune_q8x.sh and bench/tune_attention.sh (sourced, not run): the case
# runner they carry to the GPU machine, a kernel source's sm_90 PTX, and what ptxas says of
# one of its entries. Needs src, build and CUDA_ROOT set by the caller.

# build_ptx_check OUT: test/gpu's case runner swz-ptx-check (static libstdc++; libcuda
# opened through the driver stubs), so it runs on the GPU machine as built here.
build_ptx_check() {
  g++ -std=c++20 -O2 -I"$CUDA_ROOT/include" -I"$src/test/gpu" -I"$src" "$src"/test/gpu/ptx_check.cpp \
    "$src"/test/gpu/cases*.cpp -o "$1" -L"$CUDA_ROOT/lib64/stubs" -lcuda -static-libstdc++ -static-libgcc
}

# compile_ptx MLIR OUT-DIR: the module's sm_90 PTX into OUT-DIR (swz_<module>.ptx), as
# swizzlec lowers it (swizzles materialized first).
compile_ptx() {
  "$build/compiler/tools/swizzle-opt" "$1" -swz-materialize-swizzle \
    -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90 cubin-format=isa" \
    -swz-extract-kernels=output-dir="$2" -o /dev/null 2> /dev/null
}

# ptx_regs PTX ENTRY: "<n> registers, <m> B spilled" for ENTRY, by ptxas -v on sm_90.
ptx_regs() {
  "$CUDA_ROOT/bin/ptxas" -arch=sm_90 -v "$1" -o /dev/null 2>&1 |
    grep -A3 "entry function '$2'" | tr '\n' ' ' |
    sed -E 's/.* ([0-9]+) bytes spill stores.* Used ([0-9]+) registers.*/\2 registers, \1 B spilled/'
}
