// The prefill GEMM with Q4_1 weights dequantized straight into the swizzled shared
// tile (codegen/kernels/gemm_q4_1_f16.mlir): x by cp.async, W by byte loads,
// f16(d * q + m) and one 16-byte st.shared per chunk; ldmatrix.x4 + mma.sync as gemm_f16.
// ptxas sm_90 / sm_80: no spills, 48 KiB static shared memory.
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t/sm_90 %t/sm_80
// RUN: swizzle-opt %kernels/gemm_q4_1_f16.mlir -swz-materialize-swizzle \
// RUN:   -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_90 -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t/sm_90/swz_gemm_q4_1_f16.ptx
// RUN: %ptxas -arch=sm_90 -v %t/sm_90/swz_gemm_q4_1_f16.ptx -o %t/sm_90/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: swizzle-opt %kernels/gemm_q4_1_f16.mlir -swz-materialize-swizzle \
// RUN:   -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_80 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_80 -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t/sm_80/swz_gemm_q4_1_f16.ptx
// RUN: %ptxas -arch=sm_80 -v %t/sm_80/swz_gemm_q4_1_f16.ptx -o %t/sm_80/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// Both shared tiles are conflict-free for ldmatrix.x4 and for 16-byte row-order
// stores (cp.async for x, st.shared.v4 for the dequantized W: the same 8-lane phases):
// RUN: swizzle-opt %kernels/gemm_q4_1_f16.mlir -swz-check-bank-conflicts -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BANKS

// PTX: .visible .entry gemm_q4_1_f16(
// PTX: .maxntid 128, 1, 1
// PTX: cp.async.cg.shared.global [%r{{[0-9]+}}], [%rd{{[0-9]+}}], 16, %r{{[0-9]+}};
// PTX: ld.global.u8
// PTX: cvt.rn.f16.f32
// PTX: st.shared.v4.b32
// PTX: cp.async.wait_group 1;
// PTX: bar.sync 0;
// PTX: xor.b{{32|64}}
// PTX: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX-COUNT-8: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32

// BANKS: remark: memref.global @gemm_x: tile 192x64 of 2-byte elements (128-byte rows, Swizzle<3,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way
// BANKS: remark: memref.global @gemm_w: tile 192x64 of 2-byte elements (128-byte rows, Swizzle<3,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way

// PTXAS: Compiling entry function 'gemm_q4_1_f16'
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS: Used {{[0-9]+}} registers, used 1 barriers, 49152 bytes smem
