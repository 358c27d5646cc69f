// The tensor-core flash attention (codegen/kernels/attention_f16kv_mma.mlir, PTX
// only; head_dim 64 with Swizzle<3, 3, 3> tiles and head_dim 128 with Swizzle<3, 3, 4>)
// with its shared tiles materialised, to PTX and through ptxas for sm_90 and sm_80
// (no spills; 24,576 and 49,152 bytes of shared memory), its shared tiles checked
// conflict-free, and the file checked to be what its generator
// (codegen/kernels/gen_attention_mma.py) writes.
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t/sm_90 %t/sm_80 %t/naive
// RUN: python3 %swz_src_root/codegen/kernels/gen_attention_mma.py %t/gen.mlir
// RUN: diff %t/gen.mlir %kernels/attention_f16kv_mma.mlir
// RUN: swizzle-opt %kernels/attention_f16kv_mma.mlir -swz-materialize-swizzle \
// RUN:   -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_90 -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t/sm_90/swz_attention_f16kv_mma.ptx
// RUN: %ptxas -arch=sm_90 -v %t/sm_90/swz_attention_f16kv_mma.ptx -o %t/sm_90/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: swizzle-opt %kernels/attention_f16kv_mma.mlir -swz-materialize-swizzle \
// RUN:   -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_80 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_80 -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t/sm_80/swz_attention_f16kv_mma.ptx
// RUN: %ptxas -arch=sm_80 -v %t/sm_80/swz_attention_f16kv_mma.ptx -o %t/sm_80/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// The Q, K and V tiles claim swz.conflict_free: confirmed before and after
// materialisation; the row-major variant is rejected (8-way ldmatrix conflicts).
// RUN: swizzle-opt %kernels/attention_f16kv_mma.mlir -swz-check-bank-conflicts -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BANKS
// RUN: swizzle-opt %kernels/attention_f16kv_mma.mlir -swz-materialize-swizzle -swz-check-bank-conflicts \
// RUN:   -o /dev/null 2>&1 | FileCheck %s --check-prefix=BANKS
// RUN: sed -e 's/, swz.smem_layout = #swz.swizzle<3, 3, [34]>//' %kernels/attention_f16kv_mma.mlir > %t/naive/k.mlir
// RUN: not swizzle-opt %t/naive/k.mlir -swz-check-bank-conflicts -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NAIVEBANKS

// PTX-NOT: .extern
// PTX: .visible .entry flash_attention_f16kv_mma(
// PTX: .maxntid 128, 1, 1
// Q tile: f32 * scale rounded to f16, then 4 ldmatrix.x4 A fragments per warp.
// PTX: cvt.rn.f16.f32
// PTX-COUNT-4: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// K and V pages: 16-byte cp.async with a src-size operand (0 = zero fill past kv_hi).
// PTX: selp.b32 [[SZ:%r[0-9]+]], 16, 0,
// PTX: cp.async.cg.shared.global [%r{{[0-9]+}}], [%rd{{[0-9]+}}], 16, [[SZ]];
// PTX: cp.async.cg.shared.global [%r{{[0-9]+}}], [%rd{{[0-9]+}}], 16, [[SZ]];
// PTX: cp.async.commit_group;
// PTX: cp.async.wait_group 0;
// S = Q K^T: 8 n-tiles x 4 k-steps.
// PTX-COUNT-32: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// Row max over the quad, then P.V with V fragments from ldmatrix.trans.
// PTX: shfl.sync.bfly.b32
// PTX: ex2.approx
// PTX: ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16
// PTX-COUNT-32: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// PTX: bar.sync 0;
// PTX-NOT: .extern

// PTXAS: Compiling entry function 'flash_attention_f16kv_mma_hd128'
// PTXAS-NEXT: Function properties for flash_attention_f16kv_mma_hd128
// PTXAS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NEXT: Used {{[0-9]+}} registers, used 1 barriers, 49152 bytes smem
// PTXAS: Compiling entry function 'flash_attention_f16kv_mma'
// PTXAS-NEXT: Function properties for flash_attention_f16kv_mma
// PTXAS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NEXT: Used {{[0-9]+}} registers, used 1 barriers, 24576 bytes smem

// BANKS: remark: memref.global @attn_mma_q: tile 64x64 of 2-byte elements (128-byte rows, Swizzle<3,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way
// BANKS: remark: memref.global @attn_mma_k: tile 64x64 of 2-byte elements (128-byte rows, Swizzle<3,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way
// BANKS: remark: memref.global @attn_mma_v: tile 64x64 of 2-byte elements (128-byte rows, Swizzle<3,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way
// BANKS: remark: memref.global @attn_mma128_q: tile 64x128 of 2-byte elements (256-byte rows, Swizzle<3,3,4>): ldmatrix.x4 1-way, cp.async.16 1-way
// BANKS: remark: memref.global @attn_mma128_k: tile 64x128 of 2-byte elements (256-byte rows, Swizzle<3,3,4>): ldmatrix.x4 1-way, cp.async.16 1-way
// BANKS: remark: memref.global @attn_mma128_v: tile 64x128 of 2-byte elements (256-byte rows, Swizzle<3,3,4>): ldmatrix.x4 1-way, cp.async.16 1-way
// NAIVEBANKS-DAG: error: memref.global @attn_mma_q claims conflict_free but ldmatrix.x4 on smem tile (64x64 of 2-byte elements (128-byte rows, row-major)) is 8-way bank-conflicted
// NAIVEBANKS-DAG: error: memref.global @attn_mma128_q claims conflict_free but ldmatrix.x4 on smem tile (64x128 of 2-byte elements (256-byte rows, row-major)) is 8-way bank-conflicted
