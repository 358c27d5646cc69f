// End to end: the tensor-core GEMM tile (codegen/kernels/gemm_f16_mma_sync.mlir)
// with its swizzled shared memory materialised, lowered through gpu + nvgpu + nvvm
// to LLVM NVPTX, written out as PTX and assembled by ptxas for sm_90 and sm_80.
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t/sm_90 %t/sm_80 %t/naive
// RUN: swizzle-opt %kernels/gemm_f16_mma_sync.mlir -swz-materialize-swizzle \
// RUN:   -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_90 -o /dev/null
// RUN: FileCheck %s --check-prefixes=PTX,PTX90 < %t/sm_90/swz_kernels.ptx
// RUN: %ptxas -arch=sm_90 -v %t/sm_90/swz_kernels.ptx -o %t/sm_90/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: swizzle-opt %kernels/gemm_f16_mma_sync.mlir -swz-materialize-swizzle \
// RUN:   -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_80 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_80 -o /dev/null
// RUN: FileCheck %s --check-prefixes=PTX,PTX80 < %t/sm_80/swz_kernels.ptx
// RUN: %ptxas -arch=sm_80 -v %t/sm_80/swz_kernels.ptx -o %t/sm_80/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// Without swz-materialize-swizzle the same kernel has no XOR in its addressing
// (and, per swz-check-bank-conflicts, 8-way conflicted ldmatrix).
// RUN: sed -e 's/, swz.smem_layout = #swz.swizzle<3, 3, 3>//' %kernels/gemm_f16_mma_sync.mlir > %t/naive/k.mlir
// RUN: swizzle-opt %t/naive/k.mlir -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/naive -o /dev/null
// RUN: FileCheck %s --check-prefix=NAIVE < %t/naive/swz_kernels.ptx
// The kernel's shared-memory tiles claim swz.conflict_free: the static analysis
// confirms it before and after materialisation, and rejects the row-major variant.
// RUN: swizzle-opt %kernels/gemm_f16_mma_sync.mlir -swz-check-bank-conflicts -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BANKS
// RUN: swizzle-opt %kernels/gemm_f16_mma_sync.mlir -swz-materialize-swizzle -swz-check-bank-conflicts \
// RUN:   -o /dev/null 2>&1 | FileCheck %s --check-prefix=BANKS
// RUN: not swizzle-opt %t/naive/k.mlir -swz-check-bank-conflicts -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NAIVEBANKS

// PTX90: .target sm_90
// PTX80: .target sm_80
// PTX: .visible .entry gemm_f16_mma_sync(
// The swizzled shared-memory addresses are loop-invariant: LLVM hoists the XORs.
// PTX: xor.b{{32|64}}
// PTX: cp.async.cg.shared.global [%{{rd?[0-9]+}}], [%rd{{[0-9]+}}], 16;
// PTX: cp.async.commit_group;
// PTX: cp.async.wait_group 0;
// PTX: bar.sync 0;
// PTX: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX: ldmatrix.sync.aligned.m8n8.x2.shared.b16
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32

// BANKS: remark: memref.global @smem_a: tile 16x64 of 2-byte elements (128-byte rows, Swizzle<3,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way
// BANKS: remark: memref.global @smem_b: tile 8x64 of 2-byte elements (128-byte rows, Swizzle<3,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way
// NAIVEBANKS: error: memref.global @smem_a claims conflict_free but ldmatrix.x4 on smem tile (16x64 of 2-byte elements (128-byte rows, row-major)) is 8-way bank-conflicted

// NAIVE-NOT: xor.b
// NAIVE: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// NAIVE-NOT: xor.b

// (16 + 8) rows x 64 halves x 2 bytes = 3072 bytes of shared memory; no spills.
// PTXAS: Compiling entry function 'gemm_f16_mma_sync'
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS: Used {{[0-9]+}} registers, used 1 barriers, 3072 bytes smem

// The kernel's tile as a tile spec: the static analysis agrees that its
// Swizzle<3,3,3> shared memory is conflict-free and plain row-major is not.
// RUN: swizzle-opt %s -split-input-file -swz-check-bank-conflicts -verify-diagnostics -mlir-print-op-on-diagnostic=false
// expected-remark @+1 {{gemm_tile @gemm_f16_mma_sync: A 16x64 of 2-byte elements (128-byte rows, Swizzle<3,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way; B 8x64 of 2-byte elements (128-byte rows, Swizzle<3,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way}}
swz.gemm_tile @gemm_f16_mma_sync : f16 tile(16, 8, 64) warps(1) stages(1) smem(#swz.swizzle<3, 3, 3>) {conflict_free, mma = "mma.sync.m16n8k16", copy = "cp.async.cg.16"}
// -----
// expected-error @+1 {{gemm_tile @naive claims conflict_free but ldmatrix.x4 on smem A (16x64 of 2-byte elements (128-byte rows, row-major)) is 8-way bank-conflicted}}
swz.gemm_tile @naive : f16 tile(16, 8, 64) warps(1) stages(1) {conflict_free}
