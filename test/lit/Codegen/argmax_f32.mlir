// The greedy-sampling kernel (codegen/kernels/argmax_f32.mlir) from one source to PTX
// (ptxas sm_90 and sm_80, no spills) and to SPIR-V (spirv-val, Vulkan 1.1).
// REQUIRES: ptxas, spirv-val
// RUN: rm -rf %t && mkdir -p %t/sm_90 %t/sm_80 %t/spirv
// RUN: swizzle-opt %kernels/argmax_f32.mlir -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_90 -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t/sm_90/swz_argmax.ptx
// RUN: %ptxas -arch=sm_90 -v %t/sm_90/swz_argmax.ptx -o %t/sm_90/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: swizzle-opt %kernels/argmax_f32.mlir -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_80 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_80 -o /dev/null
// RUN: %ptxas -arch=sm_80 -v %t/sm_80/swz_argmax.ptx -o %t/sm_80/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: swizzle-opt %kernels/argmax_f32.mlir -pass-pipeline='builtin.module(gpu.module(swz-spirv-workgroup-memory),convert-gpu-to-spirv,spirv.module(spirv-lower-abi-attrs,spirv-update-vce))' \
// RUN:   | FileCheck %s --check-prefix=SPV
// RUN: swizzle-opt %kernels/argmax_f32.mlir -pass-pipeline='builtin.module(gpu.module(swz-spirv-workgroup-memory),convert-gpu-to-spirv,spirv.module(spirv-lower-abi-attrs,spirv-update-vce),swz-extract-kernels{output-dir=%t/spirv})' -o /dev/null
// RUN: %spirv-val --target-env vulkan1.1 %t/spirv/swz_argmax.spv

// The workgroup arrays are the module's, shared by its three kernels.
// PTX-DAG: .shared .align 4 .b8 best_v[1024];
// PTX-DAG: .shared .align 4 .b8 best_i[1024];
// PTX-LABEL: .visible .entry argmax_f32(
// PTX: .maxntid 256, 1, 1
// PTX: ld.global.f32
// PTX: setp.gt.f32
// PTX: bar.sync 0;
// PTX: ld.shared.f32
// PTX: ld.shared.u32
// PTX: st.global.u32
// PTX-NOT: .extern
// The two-pass form PTX packages run (parts of 4096 logits, then their maxima).
// PTX-LABEL: .visible .entry argmax_split_f32(
// PTX: mov.u32 {{.*}}%ctaid.y;
// PTX: st.global.f32
// PTX: st.global.u32
// PTX-LABEL: .visible .entry argmax_reduce_f32(
// PTX: bar.sync 0;
// PTX: st.global.u32

// PTXAS-DAG: Compiling entry function 'argmax_reduce_f32'
// PTXAS-DAG: Compiling entry function 'argmax_split_f32'
// PTXAS-NOT: spill stores, {{[1-9]}}
// PTXAS: Compiling entry function 'argmax_f32'
// PTXAS-NEXT: Function properties for argmax_f32
// PTXAS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NEXT: Used {{[0-9]+}} registers, used 1 barriers, 2048 bytes smem

// SPV-DAG: spirv.GlobalVariable @{{.*}} : !spirv.ptr<!spirv.struct<(!spirv.array<256 x f32>)>, Workgroup>
// SPV-DAG: spirv.GlobalVariable @{{.*}} : !spirv.ptr<!spirv.struct<(!spirv.array<256 x i32>)>, Workgroup>
// SPV: spirv.func @argmax_f32()
// SPV: spirv.ControlBarrier <Workgroup>, <Workgroup>, <AcquireRelease|WorkgroupMemory>
// SPV: spirv.EntryPoint "GLCompute" @argmax_f32
// SPV: spirv.ExecutionMode @argmax_f32 "LocalSize", 256, 1, 1
