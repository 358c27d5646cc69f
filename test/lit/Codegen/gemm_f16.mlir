// The prefill tensor-core GEMM (codegen/kernels/gemm_f16.mlir), generated from the
// sm_80 / sm_90 schedules by swz-lower-tiles: 64x64x64 tiles, 4 warps, 3-stage
// cp.async pipeline into Swizzle<3,3,3> shared memory, ldmatrix.x4 +
// mma.sync.m16n8k16. Lowered through gpu + nvgpu + nvvm to PTX and assembled by ptxas
// for sm_90 and sm_80 (no spills; 48 KiB static shared memory).
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t/sm_90 %t/sm_80 %t/naive
// RUN: swizzle-opt %kernels/gemm_f16.mlir -swz-apply-schedule=schedule=%schedules/sm_90.json -swz-lower-tiles \
// RUN:   -swz-materialize-swizzle -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_90 -o /dev/null
// RUN: FileCheck %s --check-prefixes=PTX,PTX90 < %t/sm_90/swz_gemm_f16.ptx
// RUN: %ptxas -arch=sm_90 -v %t/sm_90/swz_gemm_f16.ptx -o %t/sm_90/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: swizzle-opt %kernels/gemm_f16.mlir -swz-apply-schedule=schedule=%schedules/sm_80.json -swz-lower-tiles \
// RUN:   -swz-materialize-swizzle -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_80 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_80 -o /dev/null
// RUN: FileCheck %s --check-prefixes=PTX,PTX80 < %t/sm_80/swz_gemm_f16.ptx
// RUN: %ptxas -arch=sm_80 -v %t/sm_80/swz_gemm_f16.ptx -o %t/sm_80/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// A schedule without the swizzle: the addressing has no XOR, and the analysis rejects
// the conflict_free claim (8-way ldmatrix on 128-byte rows).
// RUN: grep -v '"swizzle": { "bits": 3, "base": 3, "shift": 3' %schedules/sm_90.json > %t/naive/sm_90.json
// RUN: swizzle-opt %kernels/gemm_f16.mlir -swz-apply-schedule=schedule=%t/naive/sm_90.json -swz-lower-tiles \
// RUN:   -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90 cubin-format=isa" -swz-extract-kernels=output-dir=%t/naive -o /dev/null
// RUN: FileCheck %s --check-prefix=NAIVE < %t/naive/swz_gemm_f16.ptx
// RUN: not swizzle-opt %kernels/gemm_f16.mlir -swz-apply-schedule=schedule=%t/naive/sm_90.json -swz-lower-tiles \
// RUN:   -swz-check-bank-conflicts -o /dev/null 2>&1 | FileCheck %s --check-prefix=NAIVEBANKS
// The kernel's shared tiles (3 stages x 64 rows, stacked) are conflict-free for
// its ldmatrix.x4 reads and 16-byte cp.async writes, before and after the XOR is
// materialised:
// RUN: swizzle-opt %kernels/gemm_f16.mlir -swz-apply-schedule=schedule=%schedules/sm_90.json -swz-lower-tiles \
// RUN:   -swz-check-bank-conflicts -o /dev/null 2>&1 | FileCheck %s --check-prefix=BANKS
// RUN: swizzle-opt %kernels/gemm_f16.mlir -swz-apply-schedule=schedule=%schedules/sm_90.json -swz-lower-tiles \
// RUN:   -swz-materialize-swizzle -swz-check-bank-conflicts -o /dev/null 2>&1 | FileCheck %s --check-prefix=BANKS

// PTX90: .target sm_90
// PTX80: .target sm_80
// PTX: .visible .entry gemm_f16(
// PTX: .maxntid 128, 1, 1
// The zero-filling copies: cp-size 16 with a src-size operand (0 past T, N or K).
// PTX: xor.b{{32|64}}
// PTX: cp.async.cg.shared.global [%r{{[0-9]+}}], [%rd{{[0-9]+}}], 16, %r{{[0-9]+}};
// PTX: cp.async.commit_group;
// PTX: cp.async.wait_group 1;
// PTX: bar.sync 0;
// PTX: xor.b{{32|64}}
// PTX: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX-COUNT-8: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// PTX: cp.async.wait_group 0;

// NAIVE-NOT: xor.b
// NAIVE: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// NAIVE-NOT: xor.b
// NAIVEBANKS: error: memref.global @gemm_x claims conflict_free but ldmatrix.x4 on smem tile (192x64 of 2-byte elements (128-byte rows, row-major)) is 8-way bank-conflicted

// BANKS: remark: memref.global @gemm_x: tile 192x64 of 2-byte elements (128-byte rows, Swizzle<3,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way
// BANKS: remark: memref.global @gemm_w: tile 192x64 of 2-byte elements (128-byte rows, Swizzle<3,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way

// 2 tiles x 3 stages x 64 rows x 64 halves x 2 bytes = 49152 bytes; no spills.
// PTXAS: Compiling entry function 'gemm_f16'
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS: Used {{[0-9]+}} registers, used 1 barriers, 49152 bytes smem

// The tile spec the sm_80 / sm_90 schedules give the prefill GEMM is the kernel's:
// applying either schedule to an unscheduled gemm_tile yields tile(64, 64, 64)
// warps(4) stages(3) with Swizzle<3,3,3>, and the analysis finds it conflict-free.
// RUN: swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%schedules/sm_80.json \
// RUN:   -swz-check-bank-conflicts -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=SCHED
// RUN: swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%schedules/sm_90.json \
// RUN:   -swz-check-bank-conflicts -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=SCHED
// SCHED: remark: gemm_tile @matmul_prefill: A 64x64 of 2-byte elements (128-byte rows, Swizzle<3,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way; B 64x64 of 2-byte elements (128-byte rows, Swizzle<3,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way
// SCHED: swz.gemm_tile @matmul_prefill : f16 tile(64, 64, 64) warps(4) stages(3) smem(#swz.swizzle<3, 3, 3>) {conflict_free, copy = "cp.async.cg.16", mma = "mma.sync.m16n8k16"
swz.gemm_tile @matmul_prefill : f16
