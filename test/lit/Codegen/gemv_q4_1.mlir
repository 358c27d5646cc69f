// The Q4_1 decode kernels (codegen/kernels/gemv_q4_1.mlir: matmul_q4_1, get_rows_q4_1) from
// one source to PTX (ptxas sm_90 and sm_80, no spills) and to SPIR-V (workgroup memory
// through swz-spirv-workgroup-memory; spirv-val, Vulkan 1.1).
// REQUIRES: ptxas, spirv-val
// RUN: rm -rf %t && mkdir -p %t/sm_90 %t/sm_80 %t/spirv
// RUN: swizzle-opt %kernels/gemv_q4_1.mlir -swz-apply-schedule=schedule=%schedules/sm_90.json -swz-lower-tiles \
// RUN:   -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_90 -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t/sm_90/swz_gemv_q4_1.ptx
// RUN: %ptxas -arch=sm_90 -v %t/sm_90/swz_gemv_q4_1.ptx -o %t/sm_90/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: swizzle-opt %kernels/gemv_q4_1.mlir -swz-apply-schedule=schedule=%schedules/sm_80.json -swz-lower-tiles \
// RUN:   -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_80 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_80 -o /dev/null
// RUN: %ptxas -arch=sm_80 -v %t/sm_80/swz_gemv_q4_1.ptx -o %t/sm_80/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: swizzle-opt %kernels/gemv_q4_1.mlir -pass-pipeline='builtin.module(swz-apply-schedule{schedule=%schedules/spirv.json},swz-lower-tiles,gpu.module(swz-spirv-workgroup-memory),convert-math-to-spirv,convert-gpu-to-spirv,spirv.module(spirv-lower-abi-attrs,spirv-update-vce))' \
// RUN:   | FileCheck %s --check-prefix=SPV
// RUN: swizzle-opt %kernels/gemv_q4_1.mlir -pass-pipeline='builtin.module(swz-apply-schedule{schedule=%schedules/spirv.json},swz-lower-tiles,gpu.module(swz-spirv-workgroup-memory),convert-math-to-spirv,convert-gpu-to-spirv,spirv.module(spirv-lower-abi-attrs,spirv-update-vce),swz-extract-kernels{output-dir=%t/spirv})' -o /dev/null
// RUN: %spirv-val --target-env vulkan1.1 %t/spirv/swz_gemv_q4_1.spv

// PTX-NOT: .extern
// PTX-LABEL: .visible .entry matmul_q4_1(
// PTX: .maxntid 128, 1, 1
// The 8-lane segment sums [4 rows][8 tokens][4 segments] and the 2..8-token per-thread
// partial sums [8 tokens][128 threads], f32 in shared memory.
// PTX: .shared .align 4 .b8 acc[512];
// PTX: .shared .align 4 .b8 slots[4096];
// weights: whole 32-bit words (never byte loads).
// PTX-NOT: ld.global.u8
// PTX: ld.global.{{(nc.)?}}u32
// Activations: 128-bit loads (x is memref<?xvector<4xf32>>).
// PTX: ld.global.{{(nc.)?}}v4.f32
// PTX: fma.rn.f32
// Segment sums by butterfly shuffles (xor 4, 2, 1 over the full warp), then ONE barrier.
// PTX: shfl.sync.bfly.b32 {{.*}}, 4, 31, -1;
// PTX-NEXT: add.rn.f32
// PTX-NEXT: shfl.sync.bfly.b32 {{.*}}, 2, 31, -1;
// PTX-NEXT: add.rn.f32
// PTX-NEXT: shfl.sync.bfly.b32 {{.*}}, 1, 31, -1;
// PTX: st.shared.f32
// PTX: bar.sync 0;
// PTX-NOT: bar.sync
// PTX: st.global.f32
// PTX-LABEL: .visible .entry get_rows_q4_1(
// PTX-NOT: ld.global.u8
// PTX: ld.global.{{(nc.)?}}u32
// PTX: st.global.f32
// PTX-NOT: .extern

// ptxas compiles the entries in reverse order of definition.
// PTXAS: Compiling entry function 'get_rows_q4_1'
// PTXAS-NEXT: Function properties for get_rows_q4_1
// PTXAS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NEXT: Used {{[0-9]+}} registers, used 0 barriers
// PTXAS: Compiling entry function 'matmul_q4_1'
// PTXAS-NEXT: Function properties for matmul_q4_1
// PTXAS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NEXT: Used {{[0-9]+}} registers, used 1 barriers, 4608 bytes smem

// SPV-DAG: spirv.GlobalVariable @{{.*}} : !spirv.ptr<!spirv.struct<(!spirv.array<128 x f32>)>, Workgroup>
// SPV-DAG: spirv.GlobalVariable @{{.*}} : !spirv.ptr<!spirv.struct<(!spirv.array<1024 x f32>)>, Workgroup>
// SPV: spirv.func @matmul_q4_1()
// SPV: spirv.GroupNonUniformShuffleXor <Subgroup>
// SPV: spirv.ControlBarrier <Workgroup>, <Workgroup>, <AcquireRelease|WorkgroupMemory>
// SPV: spirv.func @get_rows_q4_1()
// SPV-DAG: spirv.EntryPoint "GLCompute" @matmul_q4_1
// SPV-DAG: spirv.ExecutionMode @matmul_q4_1 "LocalSize", 128, 1, 1
// SPV-DAG: spirv.ExecutionMode @get_rows_q4_1 "LocalSize", 128, 1, 1
